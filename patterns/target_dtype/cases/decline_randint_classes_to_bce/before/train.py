import torch
import torch.nn as nn

torch.manual_seed(0)
features = torch.randn(40, 8)
grades = torch.randint(0, 5, (40, 1))
model = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
criterion = nn.BCELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    optimizer.zero_grad()
    loss = criterion(model(features), grades)
    loss.backward()
    optimizer.step()
print(loss.item())
