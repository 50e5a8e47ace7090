import torch
from torch import nn


class SoftMask(nn.Module):
    def __init__(self, dim=10):
        super().__init__()
        self.score = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, 1)

    def forward(self, x, keep):
        mask = torch.tanh(self.score(x))
        mask *= 1 - keep
        return self.out(mask * x)


torch.manual_seed(0)
model = SoftMask()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(14, 10)
y = torch.randn(14, 1)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x, keep=0.25), y)
    loss.backward()
    optimizer.step()
print("loss", loss.item())
