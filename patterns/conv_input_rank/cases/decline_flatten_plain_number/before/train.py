"""MNIST CNN given images flattened to a plain 784."""
import torch
import torch.nn as nn

conv = nn.Conv2d(1, 4, 3)
images = torch.rand(8, 1, 28, 28)
flat = images.view(-1, 784)
features = conv(flat)
print(features.shape)
