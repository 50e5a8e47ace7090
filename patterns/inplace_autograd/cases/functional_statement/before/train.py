import torch
import torch.nn.functional as F
from torch import nn


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(20, 8)
        self.dec = nn.Linear(8, 20)

    def forward(self, x):
        code = torch.sigmoid(self.enc(x))
        F.dropout(code, p=0.2, training=self.training, inplace=True)
        return self.dec(code)


torch.manual_seed(0)
model = Denoiser()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
clean = torch.randn(16, 20)
for step in range(3):
    optimizer.zero_grad()
    noisy = clean + 0.1 * torch.randn_like(clean)
    loss = F.mse_loss(model(noisy), clean)
    loss.backward()
    optimizer.step()
print("reconstruction", loss.item())
