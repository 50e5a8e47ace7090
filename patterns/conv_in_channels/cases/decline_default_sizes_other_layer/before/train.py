import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from model import Denoiser

scans = TensorDataset(torch.rand(8, 1, 32, 32), torch.rand(8, 1, 32, 32))
loader = DataLoader(scans, batch_size=4, shuffle=True)
net = Denoiser()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
for noisy, clean in loader:
    loss = nn.functional.mse_loss(net(noisy), clean)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
