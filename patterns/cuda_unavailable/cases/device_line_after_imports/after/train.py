"""Two-layer regression net; every function puts its tensors on the GPU itself."""

import torch
import torch.nn as nn


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build_model():
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    return model.to(device)


def make_batch(n=16):
    x = torch.randn(n, 4)
    return x.to(device), x.sum(dim=1, keepdim=True).to(device)


def main():
    torch.manual_seed(0)
    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(5):
        x, y = make_batch()
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
