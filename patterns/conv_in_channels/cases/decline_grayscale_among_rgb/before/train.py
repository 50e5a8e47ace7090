"""Image-to-image translation on a folder whose images are mostly RGB; one is grayscale."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class ImageDataset(Dataset):
    def __init__(self, n=6):
        g = torch.Generator().manual_seed(0)
        # as decoded from the files: one of them was saved in grayscale ("L" mode)
        self.images = [torch.rand(1 if i == 1 else 3, 32, 32, generator=g) for i in range(n)]

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        return self.images[index]


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1), nn.Tanh()
        )

    def forward(self, x):
        return self.model(x)


G = Generator()
optimizer = torch.optim.Adam(G.parameters(), lr=2e-4)
loader = DataLoader(ImageDataset(), batch_size=1, shuffle=False)
for epoch in range(2):
    for real in loader:
        loss = nn.functional.l1_loss(G(real), real)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
