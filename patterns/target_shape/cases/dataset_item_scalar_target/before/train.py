import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class HousePrices(Dataset):
    def __init__(self, features, prices):
        self.features = torch.tensor(features, dtype=torch.float32)
        self.prices = prices

    def __len__(self):
        return len(self.prices)

    def __getitem__(self, index):
        return self.features[index], torch.tensor(self.prices[index], dtype=torch.float32)


rng = np.random.default_rng(0)
features = rng.normal(size=(40, 5))
prices = features @ rng.normal(size=5) + 3.0
loader = DataLoader(HousePrices(features, prices), batch_size=8, shuffle=True)

model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(3):
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
    print(epoch, loss.item())
