"""Iris-like flower classification from a small table."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Flowers(Dataset):
    def __init__(self, n=150, seed=0):
        g = torch.Generator().manual_seed(seed)
        species = torch.randint(0, 3, (n,), generator=g)
        self.features = torch.randn(n, 4, generator=g) + species[:, None].float()
        # labels kept in one float table with the features, as read from a spreadsheet
        self.labels = torch.tensor(species.tolist(), dtype=torch.long)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.features[idx], self.labels[idx]


def train_epoch(model, loader, criterion, optimizer):
    correct = 0
    for features, labels in loader:
        logits = model(features)
        loss = criterion(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        correct += (logits.argmax(dim=1) == labels).sum().item()
    return correct / len(loader.dataset)


def main():
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    loader = DataLoader(Flowers(), batch_size=16, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(5):
        print(epoch, train_epoch(model, loader, nn.CrossEntropyLoss(), optimizer))


main()
