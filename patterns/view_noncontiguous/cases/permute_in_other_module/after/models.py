"""A small 1-D convolutional classifier over (batch, time, channels) sequences."""

import torch.nn as nn


class ConvClassifier(nn.Module):
    def __init__(self, channels=6, steps=20, num_classes=3):
        super().__init__()
        self.conv = nn.Conv1d(channels, 8, kernel_size=3, padding=1)
        self.head = nn.Linear(8 * steps, num_classes)

    def forward(self, x):
        # (batch, time, channels) -> (batch, channels, time) for Conv1d
        h = self.conv(x.permute(0, 2, 1)).relu()
        h = h.permute(0, 2, 1)
        flat = h.reshape(h.size(0), -1)  # (batch, time * channels)
        return self.head(flat)
