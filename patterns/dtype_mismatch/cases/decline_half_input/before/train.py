import torch
from torch import nn

model = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

for step in range(10):
    x = torch.randn(8, 16).half()  # "mixed precision", by hand
    target = torch.randint(0, 4, (8,))
    loss = nn.functional.cross_entropy(model(x), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
