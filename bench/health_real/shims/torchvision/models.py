"""Small stand-ins with the real constructors' signatures (a teacher or backbone)."""
import torch.nn as nn


def _net(num_classes=1000, **kwargs):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, num_classes))


resnet18 = resnet34 = resnet50 = vgg16 = mobilenet_v2 = _net
