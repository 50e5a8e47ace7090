import torch
import torch.nn as nn

nz = 8
G = nn.Sequential(nn.Linear(nz, 16), nn.ReLU(), nn.Linear(16, 4))
D = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
criterion = nn.BCELoss()
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4)
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4)
data = [torch.randn(8, 4) for _ in range(3)]
for real in data:
    b = real.size(0)
    real_label = torch.ones(b, 1, dtype=torch.float32)
    fake_label = torch.zeros(b, 1, dtype=torch.float32)
    opt_d.zero_grad()
    loss_real = criterion(D(real), real_label)
    fake = G(torch.randn(b, nz))
    loss_fake = criterion(D(fake.detach()), fake_label)
    (loss_real + loss_fake).backward()
    opt_d.step()
    opt_g.zero_grad()
    loss_g = criterion(D(fake), real_label)
    loss_g.backward()
    opt_g.step()
print(loss_g.item())
