import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.conv_in(x).mean((2, 3)))
