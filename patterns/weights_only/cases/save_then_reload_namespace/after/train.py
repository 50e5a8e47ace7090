import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def train(model, loader, args):
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    best = float("inf")
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        if total < best:
            best = total
            torch.save({"args": args, "epoch": epoch, "model": model.state_dict()}, args.checkpoint)


def evaluate_best(args):
    with torch.serialization.safe_globals([argparse.Namespace]):
        checkpoint = torch.load(args.checkpoint)
    model = nn.Linear(3, 1)
    model.load_state_dict(checkpoint["model"])
    print(f"best epoch {checkpoint['epoch']} (lr {checkpoint['args'].lr})")
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--checkpoint", default=os.path.join("runs", "best.pt"))
    args = parser.parse_args()
    os.makedirs(os.path.dirname(args.checkpoint), exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(48, 3)
    y = x.sum(dim=1, keepdim=True)
    train(nn.Linear(3, 1), DataLoader(TensorDataset(x, y), batch_size=8), args)
    evaluate_best(args)


if __name__ == "__main__":
    main()
