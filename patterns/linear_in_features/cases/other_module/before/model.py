from torch import nn


def build_classifier(num_classes=10):
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(100, num_classes),
    )
