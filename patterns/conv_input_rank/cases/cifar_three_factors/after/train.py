"""CIFAR-10 CNN whose loop was copied from a fully connected baseline."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.fc = nn.Linear(6 * 14 * 14, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        return self.fc(torch.flatten(x, 1))


loader = DataLoader(TensorDataset(torch.rand(20, 3, 32, 32), torch.randint(0, 10, (20,))), batch_size=10)
net = Net()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
for inputs, labels in loader:
    inputs = inputs.view(-1, 3, 32, 32)
    loss = F.cross_entropy(net(inputs), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
