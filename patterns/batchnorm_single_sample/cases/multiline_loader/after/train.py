"""Semi-supervised segmentation: the labelled loader is written one argument per line."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

encoder = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.BatchNorm2d(8), nn.ReLU())
decoder = nn.Conv2d(8, 2, 1)
labelled = TensorDataset(torch.rand(3, 3, 16, 16), torch.randint(0, 2, (3, 1, 1)))
supervised_loader = DataLoader(
    labelled,
    batch_size=2,
    shuffle=True,
    drop_last=True,
)
optimizer = torch.optim.SGD(list(encoder.parameters()) + list(decoder.parameters()), lr=0.01)
for epoch in range(2):
    for images, target in supervised_loader:
        output = decoder(encoder(images))
        loss = nn.functional.cross_entropy(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
