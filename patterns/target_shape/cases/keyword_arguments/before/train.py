import torch
from torch import nn

torch.manual_seed(0)
features = torch.randn(20, 3)
scores = features.mean(dim=1)
model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(20):
    optimizer.zero_grad()
    out = model(features)
    loss = criterion(
        target=scores,
        input=out,
    )
    loss.backward()
    optimizer.step()
print(loss.item())
