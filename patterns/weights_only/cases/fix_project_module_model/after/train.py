import torch
from torch import nn

import models


def train(model, steps):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(steps):
        x, y = torch.randn(4, 1, 8, 8), torch.randint(0, 3, (4,))
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


def main():
    torch.manual_seed(0)
    model = models.SmallCNN()
    train(model, 2)
    torch.save(model, "best_model.pth")
    with torch.serialization.safe_globals(
        [models.ConvBlock, models.SmallCNN, nn.BatchNorm2d, nn.Conv2d, nn.Linear, nn.AdaptiveAvgPool2d]
    ):
        best = torch.load("best_model.pth", map_location="cpu")
    print("best model", sum(p.numel() for p in best.parameters()))


if __name__ == "__main__":
    main()
