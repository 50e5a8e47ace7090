import torch
from torch import nn


class Block(nn.Module):
    """A pre-activation residual block over a sequence: [batch, tokens, dim]."""

    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 16), nn.GELU(), nn.Linear(16, dim))
        self.out = nn.Linear(dim, 1)

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        h += self.ffn(h)  # the Linear saved its [batch * tokens, dim] view of h
        return self.out(h).mean(1)


torch.manual_seed(0)
model = Block()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
inputs, targets = torch.randn(16, 5, 8), torch.randn(16, 1)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
print("final loss", loss.item())
