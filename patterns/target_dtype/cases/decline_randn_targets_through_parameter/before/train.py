"""A regression target made with torch.randn, given by mistake to a classification loss."""

import torch
import torch.nn as nn

model = nn.Linear(6, 4)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def make_data(size):
    inputs = torch.randn(size, 6)
    targets = torch.randn(size)
    return inputs, targets


def fit(inputs, targets):
    loss = criterion(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


x, y = make_data(8)
fit(x, y)
