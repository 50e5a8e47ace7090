import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(32, 4)
y = (x.sum(dim=1) > 0).float()
loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)

model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
criterion = nn.BCELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(3):
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = criterion(torch.sigmoid(model(inputs)), targets)
        loss.backward()
        optimizer.step()
    print(epoch, loss.item())
