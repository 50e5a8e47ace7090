import torch
import torch.nn as nn

from net import DTNet

torch.save(nn.DataParallel(DTNet()).state_dict(), "dt_net_mazes.pth")
