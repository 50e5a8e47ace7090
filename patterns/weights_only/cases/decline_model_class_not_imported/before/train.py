import torch
from torch import nn

import models
from checkpoints import load_best


def main():
    torch.manual_seed(0)
    model = models.SmallCNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        x, y = torch.randn(4, 1, 8, 8), torch.randint(0, 3, (4,))
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    torch.save(model, "best_model.pth")
    best = load_best("best_model.pth")
    print("best model", sum(p.numel() for p in best.parameters()))


if __name__ == "__main__":
    main()
