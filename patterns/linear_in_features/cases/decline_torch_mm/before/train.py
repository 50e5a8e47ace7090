import torch
import torch.nn as nn


class LowRankClassifier(nn.Module):
    """The output projection is a hand-made weight, not an nn.Linear."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(32, 512), nn.ReLU())
        self.weight = nn.Parameter(torch.randn(256, 10) * 0.01)
        self.bias = nn.Parameter(torch.zeros(10))

    def forward(self, x):
        h = self.encoder(x)
        return h @ self.weight + self.bias


torch.manual_seed(0)
model = LowRankClassifier()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
