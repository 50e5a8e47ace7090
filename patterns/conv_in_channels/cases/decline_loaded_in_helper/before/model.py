import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, num_classes=2):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.fc(self.conv1(x).relu().mean((2, 3)))
