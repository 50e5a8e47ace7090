import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from model import Regressor


def fit(model, loader, epochs=2):
    loss_fn = nn.L1Loss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(epochs):
        for xb, yb in loader:
            loss = loss_fn(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


torch.manual_seed(0)
inputs = torch.randn(40, 5)
targets = inputs[:, 0] * 3.0 - inputs[:, 1]
loader = DataLoader(TensorDataset(inputs, targets), batch_size=10)
print(fit(Regressor(5), loader))
