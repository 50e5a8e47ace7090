from torch import nn


class Regressor(nn.Module):
    """Predicts one value per sample."""

    def __init__(self, in_features, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.head(self.body(x))
