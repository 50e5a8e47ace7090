"""Prototype matching: each batch's embeddings are stacked with the class prototypes."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    data = TensorDataset(torch.randn(32, 12), torch.randint(0, 4, (32,)))
    loader = DataLoader(data, batch_size=8, shuffle=True)
    encoder = nn.Linear(12, 6)
    # one prototype per class, but built with the input width instead of the embedding width
    prototypes = [torch.randn(12) for _ in range(4)]
    optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1)
    for features, labels in loader:
        embedded = encoder(features)
        table = torch.stack([embedded.mean(0), *prototypes])
        loss = table.pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
