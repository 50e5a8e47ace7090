"""Keyword spotter over audio clips of different lengths, batched by a collate_fn of its own."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Clips(Dataset):
    def __init__(self, n=20):
        g = torch.Generator().manual_seed(1)
        self.items = [(torch.randn(100 + 10 * (i % 3), generator=g), i % 2) for i in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


def stack_clips(batch):
    waves = torch.stack([wave for wave, _ in batch])
    labels = torch.tensor([label for _, label in batch])
    return waves, labels


def main():
    loader = DataLoader(Clips(), batch_size=4, collate_fn=stack_clips)
    model = nn.Sequential(nn.Linear(100, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.Adam(model.parameters())
    for waves, labels in loader:
        loss = nn.functional.cross_entropy(model(waves), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
