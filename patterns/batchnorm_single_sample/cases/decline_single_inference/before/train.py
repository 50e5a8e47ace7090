"""Predict one sample right after building the model, still in training mode."""
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(12, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 3))
sample = torch.randn(12)
print(model(sample.unsqueeze(0)).softmax(-1))
