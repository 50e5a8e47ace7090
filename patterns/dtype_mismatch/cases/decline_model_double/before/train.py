"""A physics surrogate kept in float64 on purpose: the targets need the precision."""

import torch
import torch.nn as nn


def make_model():
    model = nn.Sequential(nn.Linear(3, 32), nn.Tanh(), nn.Linear(32, 1))
    return model.double()  # float64 throughout: residuals are ~1e-9


def train(model, steps=100):
    optimizer = torch.optim.LBFGS(model.parameters())
    x = torch.rand(256, 3)
    y = (x ** 2).sum(dim=1, keepdim=True)

    def closure():
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss

    for _ in range(steps):
        optimizer.step(closure)


train(make_model())
