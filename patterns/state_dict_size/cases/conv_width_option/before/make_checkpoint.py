import torch

from train import SRNet

torch.save(SRNet(n_feats=64).state_dict(), "edsr_x2.pt")
