"""Evaluate a multiview detector whose classifier was renamed since the checkpoint was saved."""
import torch
import torch.nn as nn


class MVDet(nn.Module):
    def __init__(self):
        super().__init__()
        self.base = nn.Conv2d(3, 8, 3)
        self.map_classifier = nn.Sequential(nn.Conv2d(8, 8, 1), nn.ReLU(), nn.Conv2d(8, 1, 1))

    def forward(self, x):
        return self.map_classifier(self.base(x))


model = MVDet()
model.load_state_dict(torch.load("MultiviewDetector.pth"))
print(model(torch.rand(1, 3, 20, 20)).shape)
