import torch
import torch.nn as nn


class Regressor(nn.Module):
    def __init__(self, in_dim, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)


def build():
    return Regressor(in_dim=7)


torch.manual_seed(0)
model = build()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
features, target = torch.randn(4, 9), torch.randn(4, 1)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(features), target)
    loss.backward()
    optimizer.step()
