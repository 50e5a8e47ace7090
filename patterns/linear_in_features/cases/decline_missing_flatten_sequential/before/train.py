import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(2),
    nn.Linear(16 * 2 * 2, 10),
)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
images, labels = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
for step in range(3):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
print("loss", loss.item())
