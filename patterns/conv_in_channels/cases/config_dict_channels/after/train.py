"""A segmentation head configured by a dict, trained on RGB tiles."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {
    "in_channels": 3,
    "features": 16,
    "classes": 3,
}


class SegNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.enc = nn.Conv2d(cfg["in_channels"], cfg["features"], 3, padding=1)
        self.head = nn.Conv2d(cfg["features"], cfg["classes"], 1)

    def forward(self, x):
        return self.head(torch.relu(self.enc(x)))


tiles = TensorDataset(torch.rand(8, 3, 16, 16), torch.randint(0, 3, (8, 16, 16)))
loader = DataLoader(tiles, batch_size=4, shuffle=True)
net = SegNet(CONFIG)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
for epoch in range(2):
    for images, masks in loader:
        loss = nn.functional.cross_entropy(net(images), masks)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
