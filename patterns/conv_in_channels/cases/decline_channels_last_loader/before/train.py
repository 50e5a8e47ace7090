"""Images read as H x W x C arrays by a Dataset and batched by a DataLoader."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Frames(Dataset):
    def __init__(self):
        self.images = np.random.default_rng(0).random((12, 24, 24, 3), dtype=np.float32)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return torch.from_numpy(self.images[i]), i % 2


model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for images, labels in DataLoader(Frames(), batch_size=4):
    loss = nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
