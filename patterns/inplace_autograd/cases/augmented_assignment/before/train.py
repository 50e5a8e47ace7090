import torch
from torch import nn


class GatedRegressor(nn.Module):
    def __init__(self, in_dim=8, hidden=16):
        super().__init__()
        self.gate = nn.Linear(in_dim, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        h = torch.sigmoid(self.gate(x))
        h += 1  # shift the gate to [1, 2]
        return self.out(h)


torch.manual_seed(0)
model = GatedRegressor()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
inputs = torch.randn(32, 8)
targets = torch.randn(32, 1)

for step in range(5):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
print("final loss", loss.item())
