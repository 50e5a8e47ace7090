"""Grayscale digits kept as a numpy [N, 28, 28] array, wrapped in a TensorDataset for a CNN."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

x = np.random.rand(64, 28, 28)
y = np.random.randint(0, 10, 64)
X_train = torch.tensor(x, dtype=torch.float32).unsqueeze(1)
train_set = TensorDataset(X_train, torch.tensor(y))
loader = DataLoader(train_set, batch_size=16, shuffle=True)
model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 26 * 26, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for images, labels in loader:
    images = images.to("cpu")
    loss = nn.functional.cross_entropy(model(images), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
