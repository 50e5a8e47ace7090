"""Loss curves of a small regression kept per epoch, stacked into one array at the end."""

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
x = torch.randn(64, 3)
y = x @ torch.tensor([[1.0], [-2.0], [0.5]])
model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

train_losses, test_losses = [], []
for epoch in range(5):
    loss = nn.functional.mse_loss(model(x[:48]), y[:48])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        test_losses.append(nn.functional.mse_loss(model(x[48:]), y[48:]).item())
    train_losses.append(loss.item())

curves = np.array((train_losses, test_losses))
print(curves.shape)
