"""Next-value forecasting of a noisy sine wave with an LSTM."""

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def make_windows(series, length):
    x = np.stack([series[i : i + length] for i in range(len(series) - length)])[:, :, None]
    y = series[length:, None]
    return torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)


class Forecaster(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.lstm = nn.LSTM(input_size=1, hidden_size=hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def main():
    t = np.linspace(0, 20, 400)
    series = np.sin(t) + 0.1 * np.random.default_rng(0).normal(size=t.shape)
    inputs, targets = make_windows(series, 24)
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=32, shuffle=True)
    model = Forecaster()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
