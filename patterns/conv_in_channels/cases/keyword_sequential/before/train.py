"""Fast segmentation backbone configured for 1-channel input, fed RGB tiles."""
import torch
import torch.nn as nn

model = nn.Sequential(
    nn.Conv2d(in_channels=1, out_channels=32, kernel_size=3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
    nn.Conv2d(32, 4, kernel_size=1),
    nn.Upsample(scale_factor=2),
)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
tiles = torch.rand(8, 3, 32, 32)
labels = torch.randint(0, 4, (8, 32, 32))
for i in range(0, 8, 4):
    batch = tiles[i:i + 4]
    loss = nn.functional.cross_entropy(model(batch), labels[i:i + 4])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
