import torch
from torch import nn


class TwoStageNet(nn.Module):
    """Model parallel: the first half on one GPU, the second half on another."""

    def __init__(self):
        super().__init__()
        self.stage1 = nn.Sequential(nn.Linear(32, 64), nn.ReLU()).to("cuda:0")
        self.stage2 = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to("cuda:1")

    def forward(self, x):
        h = self.stage1(x.to("cuda:0"))
        return self.stage2(h)


torch.manual_seed(0)
model = TwoStageNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(20):
    x = torch.randn(16, 32)
    y = torch.randint(0, 10, (16,)).to("cuda:1")
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", loss.item())
