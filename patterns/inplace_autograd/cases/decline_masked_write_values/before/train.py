import torch
from torch import nn
import torch.nn.functional as F


class GatedMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.out = nn.Linear(6, 1)

    def forward(self, x, mask):
        x = F.relu(self.fc(x))
        x[mask] = torch.rand_like(x)[mask]
        return self.out(x)


torch.manual_seed(0)
model = GatedMLP()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 6), torch.randn(8, 1)
for step in range(3):
    mask = torch.rand(8, 6) < 0.2
    optimizer.zero_grad()
    loss = F.mse_loss(model(x, mask), y)
    loss.backward()
    optimizer.step()
print("loss", loss.item())
