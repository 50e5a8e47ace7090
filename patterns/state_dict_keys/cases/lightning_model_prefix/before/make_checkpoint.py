import torch
import torch.nn as nn

from train import make_net


class TraversabilityModule(nn.Module):  # stands in for the LightningModule that wrapped the net
    def __init__(self, model):
        super().__init__()
        self.model = model


torch.save({"epoch": 9, "global_step": 900, "state_dict": TraversabilityModule(make_net()).state_dict()},
           "epoch=9.ckpt")
