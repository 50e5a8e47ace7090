"""Decoder head whose second conv was written for the wider backbone."""
import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.reduce = nn.Conv2d(8, 64, kernel_size=1)
        self.fuse = nn.Conv2d(128, 32, kernel_size=1)
        self.classify = nn.Conv2d(32, 5, kernel_size=1)

    def forward(self, features):
        x = torch.relu(self.reduce(features))
        x = torch.relu(self.fuse(x))
        return self.classify(x)


head = Head()
optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
for step in range(3):
    features, target = torch.rand(4, 8, 18, 32), torch.randint(0, 5, (4, 18, 32))
    loss = nn.functional.cross_entropy(head(features), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
