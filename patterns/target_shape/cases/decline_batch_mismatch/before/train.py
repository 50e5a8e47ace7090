import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(32, 4)
y = x.sum(dim=1)
loader = DataLoader(TensorDataset(x, y), batch_size=8)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

for xb, yb in loader:
    out = model(xb)
    loss = nn.functional.mse_loss(out, y)  # y: all 32 targets, not the batch's
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
