import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

data = np.loadtxt(
    ["0.1,0.2,0.3,1", "0.4,0.1,0.9,0", "0.7,0.7,0.2,1", "0.3,0.8,0.5,0"] * 8, delimiter=","
)
features = torch.tensor(data[:, :3], dtype=torch.float64)
labels = torch.tensor(data[:, 3], dtype=torch.long)

model = nn.Linear(3, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(5):
    for xb, yb in DataLoader(TensorDataset(features, labels), batch_size=8):
        loss = nn.functional.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
