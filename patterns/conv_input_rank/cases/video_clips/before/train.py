"""Frame classifier fed whole clips [N, T, C, H, W] straight from a video dataset."""
import torch
import torch.nn as nn

backbone = nn.Sequential(nn.Conv2d(3, 8, 4, stride=4), nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
clips = torch.rand(2, 16, 3, 32, 32)
logits = backbone(clips)
print(logits.shape)
