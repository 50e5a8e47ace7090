import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(10, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
images = torch.rand(6, 10)
labels = torch.randint(0, 4, (6,))

for step in range(3):
    optimizer.zero_grad()
    logits = model(images)
    loss = nn.functional.cross_entropy(logits, labels)
    images.mul_(255)  # back to pixel values for the preview
    loss.backward()
    optimizer.step()
    images.div_(255)
print("loss", loss.item())
