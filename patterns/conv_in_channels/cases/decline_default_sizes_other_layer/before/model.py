import torch.nn as nn


class Denoiser(nn.Module):
    """Restores images of `channels` channels: the same number goes in and comes out."""

    def __init__(self, channels=3):
        super().__init__()
        self.encode = nn.Conv2d(channels, 16, 3, padding=1)
        self.decode = nn.Conv2d(16, channels, 3, padding=1)

    def forward(self, x):
        return self.decode(self.encode(x).relu())
