"""Features collected from a model left in training mode: the loop neither trains nor turns autograd off."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU())
loader = DataLoader(TensorDataset(torch.randn(5, 8)), batch_size=2)

bank = []
for (x,) in loader:
    bank.append(encoder(x))
print(torch.cat(bank).shape)
