"""A residual block whose shortcut skips the stride of the main branch."""
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        identity = x
        out = self.conv2(torch.relu(self.conv1(x)))
        out = out + identity
        return torch.relu(out)


net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), Block(16), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
images = torch.rand(2, 3, 32, 32)
print(net(images).shape)
