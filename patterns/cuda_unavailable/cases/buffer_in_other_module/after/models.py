import torch
import torch.nn as nn


class MaskedMLP(nn.Module):
    """An MLP whose first layer sees only the features its fixed mask lets through."""

    def __init__(self, features=8, hidden=16):
        super().__init__()
        self.register_buffer("mask", torch.ones(features, device="cuda" if torch.cuda.is_available() else "cpu"))
        self.mask[::2] = 0.0
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x * self.mask)
