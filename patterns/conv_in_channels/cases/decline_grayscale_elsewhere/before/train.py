"""A grayscale digit classifier: the evaluation images are converted, the training ones are not."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def to_grayscale(images):
    weights = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)
    return (images * weights).sum(1, keepdim=True)


class DigitNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(self.pool(torch.relu(self.conv1(x))).flatten(1))


colour = torch.rand(16, 3, 28, 28)
labels = torch.randint(0, 10, (16,))
train_loader = DataLoader(TensorDataset(colour[:12], labels[:12]), batch_size=4, shuffle=True)
test_loader = DataLoader(TensorDataset(to_grayscale(colour[12:]), labels[12:]), batch_size=4)
net = DigitNet()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for images, targets in train_loader:
    loss = nn.functional.cross_entropy(net(images), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with torch.no_grad():
    correct = sum((net(images).argmax(1) == targets).sum().item() for images, targets in test_loader)
print("accuracy", correct / 4)
