import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
x = torch.randn(16, 3)
y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1  # (16,)

model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

for step in range(100):
    pred = model(x)  # (16, 1)
    loss = F.mse_loss(pred.squeeze(1), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

print("final loss", loss.item())
