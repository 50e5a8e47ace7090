import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from model import SmallCNN

digits = TensorDataset(torch.rand(12, 1, 28, 28), torch.randint(0, 10, (12,)))
loader = DataLoader(digits, batch_size=4, shuffle=True)
net = SmallCNN()
ema = SmallCNN()  # the running average of net's weights, used for evaluation
for p in ema.parameters():
    p.requires_grad_(False)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for images, labels in loader:
    loss = nn.functional.cross_entropy(net(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for average, weight in zip(ema.parameters(), net.parameters()):
            average.mul_(0.99).add_(weight, alpha=0.01)
