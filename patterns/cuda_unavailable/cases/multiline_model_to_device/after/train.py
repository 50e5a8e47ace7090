"""A small classifier whose construction is written over several lines before .to(device)."""

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"

model = nn.Sequential(
    nn.Linear(4, 8),
    nn.ReLU(),
    nn.Linear(8, 2),
).to(device)

x = torch.randn(16, 4).to(device)
y = torch.randint(0, 2, (16,)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
