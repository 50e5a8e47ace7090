"""A small segmentation net written for RGB, trained on grayscale scans."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class TinyUNet(nn.Module):
    def __init__(self, n_classes=2):
        super().__init__()
        self.inc = nn.Conv2d(3, 16, 3, padding=1)
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.outc = nn.Conv2d(16, n_classes, 1)

    def forward(self, x):
        x1 = torch.relu(self.inc(x))
        return self.outc(torch.relu(self.up(torch.relu(self.down(x1)))) + x1)


scans = TensorDataset(torch.rand(12, 1, 32, 32), torch.randint(0, 2, (12, 32, 32)))
loader = DataLoader(scans, batch_size=4, shuffle=True)
net = TinyUNet()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
for epoch in range(2):
    for imgs, masks in loader:
        loss = nn.functional.cross_entropy(net(imgs), masks)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
