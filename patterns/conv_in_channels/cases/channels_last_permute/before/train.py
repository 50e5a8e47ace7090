"""CIFAR-like arrays stored [N, H, W, C] fed to a CNN without transposing."""
import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(0)
images = rng.random((16, 32, 32, 3), dtype=np.float32)
labels = rng.integers(0, 10, 16)
model = nn.Sequential(nn.Conv2d(3, 32, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(0, 16, 8):
    x = torch.from_numpy(images[i:i + 8])
    y = torch.from_numpy(labels[i:i + 8])
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
