"""A digit classifier written for one channel, trained on colour crops of house numbers."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class DigitNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(self.pool(x).flatten(1))


crops = TensorDataset(torch.rand(12, 3, 32, 32), torch.randint(0, 10, (12,)))
loader = DataLoader(crops, batch_size=4, shuffle=True)
net = DigitNet()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for epoch in range(2):
    for images, labels in loader:
        loss = nn.functional.cross_entropy(net(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
