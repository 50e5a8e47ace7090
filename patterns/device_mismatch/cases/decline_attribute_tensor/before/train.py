import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ScaledRegressor(nn.Module):
    def __init__(self, features=6):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 16), nn.Tanh(), nn.Linear(16, 1))
        # per-target output scale, fixed (not learned)
        self.scale = torch.tensor([2.5])

    def forward(self, x):
        return self.body(x) * self.scale


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    x = torch.randn(64, 6)
    y = x[:, :1] * 2.0
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = ScaledRegressor().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(epoch, loss.item())


if __name__ == "__main__":
    main()
