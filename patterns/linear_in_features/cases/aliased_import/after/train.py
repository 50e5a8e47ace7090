import torch
import torch.nn as tnn


class Regressor(tnn.Module):
    def __init__(self):
        super().__init__()
        self.body = tnn.Sequential(tnn.Linear(8, 48), tnn.Tanh())
        self.head = tnn.Linear(48, 1)

    def forward(self, x):
        return self.head(self.body(x)).squeeze(-1)


torch.manual_seed(0)
model = Regressor()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.rand(64, 8)
y = x.sum(dim=1)
for step in range(10):
    opt.zero_grad()
    loss = tnn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
print(f"mse {loss.item():.4f}")
