"""Classify ECG-like signals with a small 1-d CNN."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class Signals(Dataset):
    def __init__(self, count=96, length=64, seed=0):
        rng = np.random.default_rng(seed)
        self.labels = rng.integers(0, 3, size=count)
        t = np.linspace(0, 1, length)
        self.signals = np.sin(2 * np.pi * (self.labels[:, None] + 1) * t) + 0.3 * rng.normal(size=(count, length))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        signal = torch.from_numpy(self.signals[idx]).unsqueeze(0)
        return {"signal": signal, "label": int(self.labels[idx])}


class SignalNet(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.conv = nn.Conv1d(1, 8, kernel_size=5, padding=2)
        self.head = nn.Linear(8, classes)

    def forward(self, signal):
        h = F.relu(self.conv(signal))
        return self.head(h.mean(dim=2))


def run():
    loader = DataLoader(Signals(), batch_size=16, shuffle=True)
    net = SignalNet()
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    for batch in loader:
        logits = net(batch["signal"])
        loss = F.cross_entropy(logits, batch["label"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


run()
