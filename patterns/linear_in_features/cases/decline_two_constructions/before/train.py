import torch
import torch.nn as nn

from modules import Encoder


class TwoTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.query = Encoder(input_size=6)
        self.item = Encoder(input_size=8)

    def forward(self, q, i):
        return self.query(q) + self.item(i)


torch.manual_seed(0)
model = TwoTower()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
# each tower concatenates three views of its input: the definition's `2 * input_size` is wrong
q, i, y = torch.randn(4, 18), torch.randn(4, 24), torch.randn(4, 1)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(q, i), y)
    loss.backward()
    optimizer.step()
print("ok", loss.item())
