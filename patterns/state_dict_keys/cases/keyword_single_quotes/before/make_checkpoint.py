import torch
import torch.nn as nn

from train_model import Encoder

torch.save({'state_dict': nn.DataParallel(Encoder()).state_dict()}, 'best_net_E.pth')
