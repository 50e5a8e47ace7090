import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, in_features=12, num_classes=4):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_features, 32), nn.ReLU(), nn.Linear(32, num_classes))

    def forward(self, x):
        return self.body(x)
