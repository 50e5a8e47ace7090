import torch
from torch import nn


class ClippedGate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.out = nn.Linear(6, 1)

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))
        h = h.masked_fill(h > 0, 0)
        return self.out(h)


torch.manual_seed(0)
model = ClippedGate()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 6), torch.randn(8, 1)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print("loss", loss.item())
