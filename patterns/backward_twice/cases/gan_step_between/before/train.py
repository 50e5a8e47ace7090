"""A GAN whose discriminator step backpropagates into the generator's graph."""
import torch
import torch.nn as nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
opt_g = torch.optim.Adam(G.parameters())
opt_d = torch.optim.Adam(D.parameters())
bce = nn.BCEWithLogitsLoss()
real = torch.randn(16, 2)

for step in range(3):
    fake = G(torch.randn(16, 4))
    d_loss = bce(D(real), torch.ones(16, 1)) + bce(D(fake), torch.zeros(16, 1))
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = bce(D(fake), torch.ones(16, 1))
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
