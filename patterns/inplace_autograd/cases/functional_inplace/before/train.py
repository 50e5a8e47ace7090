import torch
import torch.nn.functional as nnf
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(12, 12)
        self.head = nn.Linear(12, 3)

    def forward(self, x):
        h = torch.sigmoid(self.proj(x))
        h = nnf.relu(h, inplace=True)
        return self.head(h)


torch.manual_seed(0)
encoder = Encoder()
optimizer = torch.optim.SGD(encoder.parameters(), lr=0.05)
x = torch.randn(16, 12)
y = torch.randint(0, 3, (16,))
for step in range(4):
    optimizer.zero_grad()
    loss = nnf.cross_entropy(encoder(x), y)
    loss.backward()
    optimizer.step()
print("loss", round(loss.item(), 4))
