import torch
import torch.nn.functional as Fn
from torch import nn as tnn


class PriceModel(tnn.Module):
    def __init__(self):
        super().__init__()
        self.fc = tnn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)


def step(model, optimizer, batch, prices):
    optimizer.zero_grad()
    estimate = model(batch)
    loss = Fn.smooth_l1_loss(estimate.squeeze(1), prices, beta=0.5)
    loss.backward()
    optimizer.step()
    return loss.item()


torch.manual_seed(0)
model = PriceModel()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
batch = torch.rand(12, 4)
prices = batch.sum(dim=1)
for _ in range(10):
    print(step(model, optimizer, batch, prices))
