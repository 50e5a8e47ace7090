"""Burst super-resolution: each sample is a stack of low-resolution frames; a collator batches them."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Bursts(Dataset):
    def __init__(self, n=32):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        g = torch.Generator().manual_seed(idx)
        width = 16 if idx % 2 == 0 else 24
        frames = torch.randn(4, 16, width, generator=g)
        return {"frames": frames, "target": frames.mean(0, keepdim=True)}


class BurstCollator:
    def __call__(self, batch):
        return self.stack_frames(batch)

    def stack_frames(self, batch):
        frames = torch.stack([item["frames"] for item in batch], dim=0)
        target = torch.stack([item["target"] for item in batch], dim=0)
        return frames, target


def main():
    loader = DataLoader(Bursts(), batch_size=4, num_workers=2, collate_fn=BurstCollator())
    model = nn.Conv2d(4, 1, 3, padding=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for frames, target in loader:
        loss = nn.functional.l1_loss(model(frames), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
