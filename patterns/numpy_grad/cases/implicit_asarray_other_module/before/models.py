import torch.nn as nn


class Encoder(nn.Module):
    """Maps 10 raw features to an 8-d embedding."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 8))

    def forward(self, x):
        return self.net(x)
