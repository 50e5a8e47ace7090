import torch

from train import build

torch.save({"state_dict": build({"feat_dim": 2048, "ids": 625}).state_dict()}, "student.pth.tar")
