"""Activity recognition from 6 IMU channels with a 1-D CNN written for 4."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

windows = TensorDataset(torch.randn(30, 6, 50), torch.randint(0, 3, (30,)))
loader = DataLoader(windows, batch_size=10, shuffle=True)
encoder = nn.Conv1d(4, 16, kernel_size=5)
classifier = nn.Linear(16, 3)
params = list(encoder.parameters()) + list(classifier.parameters())
optimizer = torch.optim.Adam(params)
for signals, activity in loader:
    hidden = torch.relu(encoder(signals)).mean(-1)
    loss = nn.functional.cross_entropy(classifier(hidden), activity)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
