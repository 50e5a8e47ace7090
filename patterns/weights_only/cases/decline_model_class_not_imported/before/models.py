import torch.nn as nn


class ConvBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x):
        return self.norm(self.conv(x)).relu()


class SmallCNN(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.block = ConvBlock(4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, classes)

    def forward(self, x):
        return self.fc(self.pool(self.block(self.stem(x))).flatten(1))
