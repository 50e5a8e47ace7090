import torch
import torch.nn as nn

from config import TrainConfig


def build(config):
    return nn.Sequential(nn.Linear(4, config.hidden), nn.ReLU(), nn.Linear(config.hidden, 1))


def main():
    config = TrainConfig()
    model = build(config)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    for epoch in range(config.epochs):
        optimizer.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        optimizer.step()
    torch.save({"config": config, "model": model.state_dict()}, "run.pt")

    resumed = torch.load("run.pt")
    model = build(resumed["config"])
    model.load_state_dict(resumed["model"])
    print("resumed with", resumed["config"])


if __name__ == "__main__":
    main()
