import torch.nn as nn


class DTNet(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.projection = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU())
        self.recur_block = nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU())
        self.head = nn.Sequential(nn.Conv2d(width, 2, 3, padding=1))

    def forward(self, x, iters=3):
        h = self.projection(x)
        for _ in range(iters):
            h = self.recur_block(h)
        return self.head(h)
