"""Classify one scanned digit with a trained CNN: the image is a bare [H, W] array."""
import numpy as np
import torch
import torch.nn as nn

model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
model.eval()
pixels = np.random.default_rng(0).random((28, 28), dtype=np.float32)
image = torch.from_numpy(pixels)
with torch.no_grad():
    prediction = model(image).argmax(1)
print(prediction)
