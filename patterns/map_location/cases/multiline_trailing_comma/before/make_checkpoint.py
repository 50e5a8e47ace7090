import torch
from torch import nn

torch.manual_seed(0)
torch.save(nn.Linear(4, 2).state_dict(), "weights.pt")
