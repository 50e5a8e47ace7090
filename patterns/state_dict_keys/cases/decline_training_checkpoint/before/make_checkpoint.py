import torch

from train import Forecaster

model = Forecaster()
torch.save({"epoch": 12, "global_step": 4800, "state_dict": model.state_dict(),
            "optimizer_states": [torch.optim.Adam(model.parameters()).state_dict()]}, "last.ckpt")
