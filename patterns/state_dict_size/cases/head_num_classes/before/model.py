import torch.nn as nn


class CarNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten())
        self.fc = nn.Linear(16 * 4 * 4, num_classes)

    def forward(self, x):
        return self.fc(self.features(x))
