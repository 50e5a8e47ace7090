import torch
from torch import nn


class Residual(nn.Module):
    """A feed-forward residual applied straight to the input features."""

    def __init__(self, dim=8):
        super().__init__()
        self.ffn = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, dim))
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        x = x + self.ffn(x)
        return self.head(x)


torch.manual_seed(0)
model = Residual()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    inputs, targets = torch.randn(16, 8), torch.randn(16, 1)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
print("final loss", loss.item())
