"""A GRU encoder whose initial state gets one unsqueeze too many."""
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 16, batch_first=True)
        self.fc = nn.Linear(16, 2)

    def forward(self, x, h):
        out, h = self.gru(x, h)
        return self.fc(out[:, -1]), h


net = Encoder()
x = torch.randn(4, 5, 8)
h = torch.zeros(1, 4, 16).unsqueeze(0)
print(net(x, h)[0].shape)
