"""Regression of a float64 target with a float64 network; the features are cast to float32 by hand."""

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(0)
features = rng.normal(size=(512, 6))
target = torch.from_numpy(features @ rng.normal(size=(6, 1)))  # float64

x = torch.from_numpy(features).float()
model = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 1))
model.double()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
for epoch in range(50):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
