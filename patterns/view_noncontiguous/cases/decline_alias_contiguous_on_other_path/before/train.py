import torch
import torch.nn as nn


def decay_(grid, channels_last):
    """Halves every cell of grid in place, through a flat view of it."""
    cells = grid.permute(0, 2, 3, 1) if channels_last else grid
    flat = cells.view(-1)
    flat.mul_(0.5)


def main():
    torch.manual_seed(0)
    model = nn.Conv2d(2, 2, 3, padding=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    memory = torch.zeros(4, 2, 6, 6)
    for step in range(3):
        x = torch.randn(4, 2, 6, 6)
        with torch.no_grad():
            memory += x
            decay_(memory, channels_last=True)
        loss = (model(x) - memory).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("loss", loss.item())


if __name__ == "__main__":
    main()
