import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from models import ConvClassifier


def train(model, loader, optimizer, epochs=2):
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        total = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch}: loss {total / len(loader):.4f}")


def main():
    torch.manual_seed(0)
    x = torch.randn(64, 20, 6)
    y = torch.randint(0, 3, (64,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = ConvClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train(model, loader, optimizer)


if __name__ == "__main__":
    main()
