import torch
from torch import nn


class GatedMixer(nn.Module):
    """Gates the input, splits it into heads and adds a per-head feed-forward (a residual)."""

    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.gate = nn.Linear(dim, dim)
        self.ffn = nn.Sequential(nn.Linear(dim // heads, 16), nn.GELU(), nn.Linear(16, dim // heads))
        self.out = nn.Linear(dim, 1)

    def forward(self, x):
        g = torch.sigmoid(self.gate(x))
        h = g.view(x.shape[0], self.heads, -1)
        h = h + self.ffn(h)  # residual
        return self.out(h.flatten(1))


torch.manual_seed(0)
model = GatedMixer()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
inputs, targets = torch.randn(16, 8), torch.randn(16, 1)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
print("final loss", loss.item())
