import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def train(model, loader, epochs=2):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()
    history = []
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            history.append(loss.detach().cpu().numpy())
        print(f"epoch {epoch}: mean loss {np.mean(history):.4f}")
    return history


def main():
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    model = nn.Linear(4, 1)
    train(model, DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True))


if __name__ == "__main__":
    main()
