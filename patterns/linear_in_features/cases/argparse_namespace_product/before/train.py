import argparse

import torch
import torch.nn as nn


class WindowMLP(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.fc1 = nn.Linear(args.n_features, args.hidden)
        self.fc2 = nn.Linear(args.hidden, 1)

    def forward(self, x):
        x = x.reshape(x.size(0), -1)
        return self.fc2(torch.relu(self.fc1(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--n-features", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    torch.manual_seed(0)
    series = torch.randn(200, args.n_features)
    windows = series.unfold(0, args.window, 1).transpose(1, 2)  # [N, window, n_features]
    targets = torch.randn(len(windows), 1)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(windows, targets), batch_size=args.batch_size, shuffle=True
    )
    model = WindowMLP(args)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
    print("ok", loss.item())


if __name__ == "__main__":
    main()
