"""The training loop hands each batch to a step function, which calls backward and step."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(5, 8), torch.randint(0, 2, (5,))), batch_size=2, shuffle=True)


def train_step(x, y):
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


for epoch in range(2):
    model.train()
    for x, y in loader:
        train_step(x, y)
