import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(24, 5)
y = x[:, :2].sum(dim=1)

wide = nn.Linear(5, 1)
deep = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1))
params = list(wide.parameters()) + list(deep.parameters())
optimizer = torch.optim.Adam(params, lr=1e-2)
loss_fn = nn.HuberLoss()

for step in range(10):
    optimizer.zero_grad()
    loss = loss_fn((wide(x) + deep(x)) / 2, y)
    loss.backward()
    optimizer.step()
print(loss.item())
