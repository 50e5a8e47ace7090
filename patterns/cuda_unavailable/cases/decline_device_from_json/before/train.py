import json

import torch
import torch.nn as nn


def main():
    with open("config.json") as handle:
        cfg = json.load(handle)
    model = nn.Linear(5, 1).to(cfg["device"])
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    x = torch.randn(20, 5)
    for step in range(cfg["steps"]):
        optimizer.zero_grad()
        loss = model(x.to(cfg["device"])).pow(2).mean()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
