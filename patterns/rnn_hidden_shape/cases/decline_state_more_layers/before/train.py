"""A tagger whose state is made with two layers for a one-layer LSTM."""
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, hidden_dim=16):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.lstm = nn.LSTM(8, hidden_dim, num_layers=1, batch_first=True)
        self.fc = nn.Linear(hidden_dim, 3)

    def forward(self, x):
        h0 = torch.zeros(2, x.size(0), self.hidden_dim)
        c0 = torch.zeros(2, x.size(0), self.hidden_dim)
        out, _ = self.lstm(x, (h0, c0))
        return self.fc(out)


net = Tagger()
print(net(torch.randn(4, 5, 8)).shape)
