import torch

from train import Model

torch.save(Model().state_dict(), "ntu120_xsub_spatial.pt")
