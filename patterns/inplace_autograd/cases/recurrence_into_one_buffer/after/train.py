import torch
from torch import nn


class Decay(nn.Module):
    """A learned exponential decay over time steps, written into one state buffer."""

    def __init__(self, dim=4, steps=6):
        super().__init__()
        self.steps = steps
        self.w = nn.Parameter(torch.full((dim,), 0.9))

    def forward(self, x):
        buf = torch.zeros(self.steps, *x.shape)
        buf[0] = x
        for t in range(1, self.steps):
            buf[t] = buf[t - 1].clone() * self.w
        return buf.sum(0)


torch.manual_seed(0)
model = Decay()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    x, y = torch.randn(8, 4), torch.randn(8, 4)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print("final loss", loss.item())
