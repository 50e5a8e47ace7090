import torch
import torch.nn as nn


def summarize(xs, ys):
    """A text 'plot': the mean and range of a curve."""
    return f"x in [{xs.min():.2f}, {xs.max():.2f}], mean y {ys.mean():.3f}"


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    grid = torch.linspace(-2, 2, 40).unsqueeze(1)
    for epoch in range(3):
        optimizer.zero_grad()
        loss = (model(grid) - grid.sin()).pow(2).mean()
        loss.backward()
        optimizer.step()
        scaled = grid * model[0].weight.mean()
        curve = model(grid)
        print(f"epoch {epoch}:", summarize(scaled.detach().numpy(), curve.detach().numpy()))


if __name__ == "__main__":
    main()
