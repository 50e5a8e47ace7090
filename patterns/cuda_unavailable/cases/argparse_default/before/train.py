import argparse

import torch
import torch.nn as nn


def get_args():
    parser = argparse.ArgumentParser(description="regression on the GPU")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--device", type=str, default="cuda", help="where to train")
    return parser.parse_args()


def train(args):
    torch.manual_seed(0)
    model = nn.Linear(4, 1).to(args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(32, 4, device=args.device)
    y = x.sum(dim=1, keepdim=True)
    for epoch in range(args.epochs):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch}: {loss.item():.4f}")


if __name__ == "__main__":
    train(get_args())
