import os

import torch
from torch import nn

torch.manual_seed(0)
os.makedirs('ckpt', exist_ok=True)
torch.save({'model': nn.Linear(4, 2).state_dict(), 'step': 100}, 'ckpt/model.pt')
