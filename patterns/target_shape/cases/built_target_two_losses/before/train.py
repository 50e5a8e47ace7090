import numpy as np
import torch
from torch import nn

rng = np.random.default_rng(0)
features = rng.normal(size=(32, 4))
prices = features @ np.array([1.0, -0.5, 2.0, 0.3])

X = torch.tensor(features, dtype=torch.float32)
y = torch.tensor(prices, dtype=torch.float32)
X_train, y_train = X[:24], y[:24]
X_val, y_val = X[24:], y[24:]

model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)


def batch_count(targets):
    return targets.size(0)


for epoch in range(5):
    optimizer.zero_grad()
    loss = criterion(model(X_train), y_train)
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        val_loss = criterion(model(X_val), y_val)
    print(epoch, loss.item(), val_loss.item(), batch_count(y_val))
