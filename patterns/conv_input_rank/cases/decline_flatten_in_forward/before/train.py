"""A model that flattens inside forward before its own conv: the model, not the data, is wrong."""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)

    def forward(self, x):
        x = x.view(-1, 28 * 28)
        return self.conv(x)


print(Net()(torch.rand(2, 1, 28, 28)).shape)
