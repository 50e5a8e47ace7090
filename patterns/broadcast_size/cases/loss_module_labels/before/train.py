"""Regression on three targets, with labels read as one value per sample."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class L1Loss(nn.Module):
    def forward(self, pred, y):
        diff = pred - y
        return diff.abs().mean()


data = TensorDataset(torch.randn(40, 6), torch.randn(40))
loader = DataLoader(data, batch_size=8, shuffle=True)
model = nn.Linear(6, 3)
criterion = L1Loss()
optimizer = torch.optim.Adam(model.parameters())
for x, y in loader:
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
