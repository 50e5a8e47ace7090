"""Sensor time-series regression with an LSTM on the GPU."""
import torch
import torch.nn as nn


class Forecaster(nn.Module):
    def __init__(self, features=6, hidden=64):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    series = torch.randn(64, 48, 6)
    target = series[:, -1, :1] * 0.5
    model = Forecaster().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(100):
        prediction = model(series.to(device))
        loss = nn.functional.mse_loss(prediction, target.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
