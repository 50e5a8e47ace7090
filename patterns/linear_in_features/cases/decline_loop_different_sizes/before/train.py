import torch
import torch.nn as nn


class MultiScaleHead(nn.Module):
    """Projects feature maps of three scales to a common size and sums them."""

    def __init__(self, channels=(32, 64, 96), out_dim=16):
        super().__init__()
        self.proj = nn.ModuleList([nn.Linear(c, out_dim) for c in channels])

    def forward(self, features):
        return sum(proj(f) for proj, f in zip(self.proj, features))


torch.manual_seed(0)
head = MultiScaleHead()
optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
# the backbone's third stage has 128 channels, not 96
features = [torch.randn(4, 32), torch.randn(4, 64), torch.randn(4, 128)]
target = torch.randn(4, 16)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(head(features), target)
    loss.backward()
    optimizer.step()
