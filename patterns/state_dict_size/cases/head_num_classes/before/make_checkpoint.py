import torch

from model import CarNet

torch.save(CarNet(num_classes=10).state_dict(), "carnet_pretrained.pth")
