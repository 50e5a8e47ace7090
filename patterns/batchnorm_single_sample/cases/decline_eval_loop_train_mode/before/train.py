"""Validation inside the training loop, with the model still in training mode."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)  # the recording stays the same run to run
model = nn.Sequential(nn.Linear(10, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
train_loader = DataLoader(TensorDataset(torch.randn(4, 10), torch.randint(0, 2, (4,))), batch_size=2)
val_loader = DataLoader(TensorDataset(torch.randn(3, 10), torch.randint(0, 2, (3,))), batch_size=2)
optimizer = torch.optim.Adam(model.parameters())


def test(loader):
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct


for epoch in range(2):
    for x, y in train_loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(epoch, test(val_loader))
