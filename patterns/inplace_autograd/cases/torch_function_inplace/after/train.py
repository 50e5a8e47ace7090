import torch
from torch import nn


class PositiveRates(nn.Module):
    """Predicts rates squashed into (0, 1)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(5, 2)

    def forward(self, x):
        rates = torch.exp(self.linear(x))
        rates = torch.sigmoid(rates)
        return rates


torch.manual_seed(0)
net = PositiveRates()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(10, 5)
target = torch.rand(10, 2)
for step in range(3):
    optimizer.zero_grad()
    loss = (net(x) - target).abs().mean()
    loss.backward()
    optimizer.step()
print("loss", loss.item())
