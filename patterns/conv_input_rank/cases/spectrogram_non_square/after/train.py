"""Keyword spotting: log-mel spectrograms (40 bands x 101 frames) flattened for a CNN."""
import torch
import torch.nn as nn


class KWS(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, (5, 5))
        self.head = nn.Linear(8, 12)

    def forward(self, spec):
        return self.head(torch.relu(self.conv(spec)).mean((2, 3)))


model = KWS()
optimizer = torch.optim.Adam(model.parameters())
for step in range(3):
    spec = torch.randn(4, 1, 40, 101)
    spec = spec.view(spec.shape[0], 1, 40, 101)
    loss = nn.functional.cross_entropy(model(spec), torch.randint(0, 12, (4,)))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
