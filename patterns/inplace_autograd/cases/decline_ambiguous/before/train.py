import torch
from torch import nn


class TwoGates(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.input_gate = nn.Linear(dim, dim)
        self.forget_gate = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, 1)

    def forward(self, x):
        i = torch.sigmoid(self.input_gate(x))
        f = torch.sigmoid(self.forget_gate(x))
        i.mul_(0.5)
        f.mul_(0.5)
        return self.out(i + f)


torch.manual_seed(0)
model = TwoGates()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(10, 8), torch.randn(10, 1)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print("loss", loss.item())
