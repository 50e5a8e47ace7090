import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, num_classes=2):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.conv2(self.conv1(x).relu()).relu()
        return self.fc(x.mean((2, 3)))
