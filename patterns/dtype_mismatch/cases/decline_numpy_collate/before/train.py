import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Tabular(Dataset):
    def __init__(self, rows=128, seed=0):
        rng = np.random.default_rng(seed)
        self.x = rng.normal(size=(rows, 10))
        self.y = (self.x.sum(axis=1) > 0).astype(np.int64)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        # numpy arrays: the DataLoader's default collate turns them into tensors
        return self.x[i], self.y[i]


def main():
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for xb, yb in DataLoader(Tabular(), batch_size=16):
        loss = nn.functional.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
