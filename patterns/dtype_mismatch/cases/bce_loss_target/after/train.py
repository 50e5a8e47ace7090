import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Churn(Dataset):
    """Customer records; churned customers are the positives."""

    def __init__(self, n=200, seed=1):
        rng = np.random.default_rng(seed)
        self.x = rng.normal(size=(n, 5))
        self.y = (self.x[:, 1] - self.x[:, 4] > 0.2).astype(np.float64)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return torch.from_numpy(self.x[i]).float(), torch.from_numpy(self.y[i : i + 1]).float()


def fit(epochs=2):
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1), nn.Sigmoid())
    criterion = nn.BCELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loader = DataLoader(Churn(), batch_size=16, shuffle=True)
    for _ in range(epochs):
        for features, churned in loader:
            probs = model(features)
            loss = criterion(probs, churned)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model


if __name__ == "__main__":
    fit()
