import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {
    "lr": 1e-3,
    "epochs": 2,
    "batch_size": 16,
    "device": "cuda",
}


def run(config):
    device = torch.device(config["device"])
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    data = TensorDataset(torch.randn(48, 6), torch.randint(0, 3, (48,)))
    for epoch in range(config["epochs"]):
        for x, y in DataLoader(data, batch_size=config["batch_size"]):
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: {loss.item():.3f}")


if __name__ == "__main__":
    run(CONFIG)
