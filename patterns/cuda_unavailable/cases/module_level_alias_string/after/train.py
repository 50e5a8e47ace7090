# Fit a sine with a tiny MLP; written for the lab's GPU box.
import torch as T
from torch import nn

DEVICE = 'cuda:0' if T.cuda.is_available() else 'cpu'
T.manual_seed(0)

net = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1)).to(DEVICE)
grid = T.linspace(-3, 3, 64, device=DEVICE).unsqueeze(1)
target = T.sin(grid)
opt = T.optim.Adam(net.parameters(), lr=1e-2)
for step in range(15):
    opt.zero_grad()
    loss = ((net(grid.to(DEVICE)) - target) ** 2).mean()
    loss.backward()
    opt.step()
print(f'final loss {loss.item():.4f}')
