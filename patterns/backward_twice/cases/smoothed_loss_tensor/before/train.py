"""Regression with a smoothed (exponential moving average) training objective."""
import torch
import torch.nn as nn


def fit(model, x, y, steps=10):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    smoothed = torch.zeros(())
    for step in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x).squeeze(-1), y)
        smoothed = 0.9 * smoothed + 0.1 * loss
        smoothed.backward()
        optimizer.step()
    return smoothed.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(32, 5)
    y = x @ torch.randn(5)
    model = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1))
    print(f"smoothed loss {fit(model, x, y):.4f}")
