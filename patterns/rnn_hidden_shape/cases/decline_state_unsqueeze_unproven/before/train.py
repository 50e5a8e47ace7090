"""A GRU whose state is unsqueezed into 4-D, and whose other sizes do not fit either."""
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 16, batch_first=True)

    def forward(self, x, h):
        return self.gru(x, h)


net = Encoder()
x = torch.randn(4, 5, 8)
h = torch.zeros(2, 4, 16).unsqueeze(0)
print(net(x, h)[0].shape)
