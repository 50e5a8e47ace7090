import torch.nn as nn


class SensorNet(nn.Module):
    def __init__(self, in_features=6, hidden=16, classes=2):
        super().__init__()
        self.hidden = nn.Linear(in_features, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        h = self.hidden(x).relu()
        return self.out(h)
