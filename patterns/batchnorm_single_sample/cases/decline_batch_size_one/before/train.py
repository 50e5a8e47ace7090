"""Training with one image per step: the pooling branch's BatchNorm sees [1, C, 1, 1]."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.BatchNorm2d(8), nn.Flatten(), nn.Linear(8, 2))
loader = DataLoader(TensorDataset(torch.rand(6, 3, 16, 16), torch.randint(0, 2, (6,))), batch_size=1, shuffle=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for images, labels in loader:
    loss = nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
