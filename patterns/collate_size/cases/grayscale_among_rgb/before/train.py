"""Image classifier on a folder-like dataset where some images are grayscale."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Photos(Dataset):
    def __init__(self, n=40):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        g = torch.Generator().manual_seed(idx)
        if idx % 5 == 1:
            image = torch.rand(32, 32, generator=g)  # a grayscale file: no channel dimension
        else:
            image = torch.rand(3, 32, 32, generator=g)
        return image, idx % 4


def main():
    loader = DataLoader(Photos(), batch_size=8, num_workers=1)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for images, labels in loader:
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
