import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = x.view(-1, 28 * 28)
        return self.fc2(F.relu(self.fc1(x)))


torch.manual_seed(0)
images = torch.rand(16, 3, 28, 28)  # colour images for a model written for grayscale digits
labels = torch.randint(0, 10, (16,))
loader = DataLoader(TensorDataset(images, labels), batch_size=8, shuffle=True)
model = MLP()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
print("done")
