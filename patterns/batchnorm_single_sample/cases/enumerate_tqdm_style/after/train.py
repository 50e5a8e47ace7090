"""Signature verification features: training loop over enumerate(train_loader)."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    base_model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU())
    classification_layer = nn.Linear(32, 5)
    train_set = TensorDataset(torch.rand(3, 1, 8, 8), torch.randint(0, 5, (3,)))
    train_loader = DataLoader(train_set, 2, shuffle=True, drop_last=True)
    params = list(base_model.parameters()) + list(classification_layer.parameters())
    optimizer = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    for epoch in range(2):
        for step, (x, y) in enumerate(train_loader):
            logits = classification_layer(base_model(x))
            loss = nn.functional.cross_entropy(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
