"""A 1-D CNN over single-lead ECG windows kept as a numpy [N, L] array in a TensorDataset."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, length):
        super().__init__()
        self.conv = nn.Conv1d(1, 4, kernel_size=5)
        self.fc = nn.Linear(4 * (length - 4), 2)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


windows = np.random.default_rng(0).standard_normal((40, 187))
labels = np.random.default_rng(1).integers(0, 2, 40)
dataset = TensorDataset(torch.from_numpy(windows).float(), torch.from_numpy(labels))
loader = DataLoader(dataset, batch_size=8, shuffle=True)
model = Net(windows.shape[1])
optimizer = torch.optim.Adam(model.parameters())
for signal, target in loader:
    loss = nn.functional.cross_entropy(model(signal), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
