"""Wine quality: the same labels train a classifier head and, as numbers, a regression head."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Wine(Dataset):
    def __init__(self, n=120):
        g = torch.Generator().manual_seed(0)
        quality = torch.randint(0, 5, (n,), generator=g)
        self.x = torch.randn(n, 6, generator=g) + quality[:, None]
        self.y = torch.tensor(quality.tolist(), dtype=torch.float32)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


classify = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 5))
regress = nn.Linear(6, 1)
params = list(classify.parameters()) + list(regress.parameters())
optimizer = torch.optim.SGD(params, lr=0.05)
ce, mse = nn.CrossEntropyLoss(), nn.MSELoss()


def fit_regression(loader):
    for x, y in loader:
        loss = mse(regress(x).squeeze(1), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def fit_classifier(loader):
    for x, y in loader:
        loss = ce(classify(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


loader = DataLoader(Wine(), batch_size=8, shuffle=True)
for epoch in range(3):
    fit_classifier(loader)
    fit_regression(loader)
