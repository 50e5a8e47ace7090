import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
x = torch.randn(50, 3)
w = torch.randn(3, 1)
net = nn.Linear(3, 1)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(10):
    loss = (net(x) - x @ w).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

np.save("residual.npy", x @ w - net(x))
