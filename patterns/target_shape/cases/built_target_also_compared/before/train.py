import numpy as np
import torch
from torch import nn

rng = np.random.default_rng(0)
features = rng.normal(size=(32, 4))
prices = features @ np.array([1.0, -0.5, 2.0, 0.3])

X = torch.tensor(features, dtype=torch.float32)
y = torch.tensor(prices, dtype=torch.float32)

model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(5):
    optimizer.zero_grad()
    pred = model(X)
    loss = criterion(pred, y)
    loss.backward()
    optimizer.step()
    within = (pred.detach().squeeze(1) - y).abs().lt(0.5).float().mean()
    print(epoch, loss.item(), within.item())
