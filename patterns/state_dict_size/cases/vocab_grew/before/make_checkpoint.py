import torch

from train import Captioner

torch.save({"model": Captioner(3054).state_dict(), "epoch": 30}, "model_best.pth")
