"""Clip classifier: a sample stacks the frames of one clip in __getitem__."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Clips(Dataset):
    def __init__(self, n=16):
        # the last frame of each clip was stored at another resolution
        self.clips = [[torch.randn(3, 8, 8), torch.randn(3, 8, 8), torch.randn(3, 8, 10)] for _ in range(n)]

    def __len__(self):
        return len(self.clips)

    def __getitem__(self, idx):
        frames = torch.stack(self.clips[idx])
        return frames, idx % 2


def main():
    loader = DataLoader(Clips(), batch_size=4)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 3 * 8 * 8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for clips, labels in loader:
        loss = nn.functional.cross_entropy(model(clips), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
