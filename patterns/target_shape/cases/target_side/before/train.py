import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Readings(Dataset):
    """Sensor readings with the value to predict stored as a column, shape (1,) per sample."""

    def __init__(self, n=30):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 6, generator=g)
        self.y = self.x[:, :3].mean(dim=1, keepdim=True)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 1)

    def forward(self, x):
        return self.fc(x).squeeze(-1)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(Readings(), batch_size=6):
    pred = model(x)
    loss = nn.functional.l1_loss(pred, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("done", loss.item())
