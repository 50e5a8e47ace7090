"""Auxiliary-classifier GAN step: the discriminator also says which of 4 classes a sample is."""

import torch
import torch.nn as nn

n_classes = 4
smooth_real = 0.9

disc = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, n_classes))
gen = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 8))
criterion = nn.CrossEntropyLoss()
opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4)
opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4)


def train_step(real):
    b_size = real.size(0)
    label = torch.full((b_size,), smooth_real)
    err_real = criterion(disc(real), label)
    fake = gen(torch.randn(b_size, 3))
    err_fake = criterion(disc(fake.detach()), label)
    opt_d.zero_grad()
    (err_real + err_fake).backward()
    opt_d.step()
    err_g = criterion(disc(fake), label)
    opt_g.zero_grad()
    err_g.backward()
    opt_g.step()
    return err_real.item(), err_g.item()


for step in range(20):
    print(step, train_step(torch.randn(16, 8)))
