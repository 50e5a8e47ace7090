import numpy as np
import torch

torch.manual_seed(0)
x = torch.randn(50, 3)
true_w = torch.tensor([[1.0], [-2.0], [0.5]])
y = x @ true_w + 0.1 * torch.randn(50, 1)

a = torch.zeros(3, 1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
optimizer = torch.optim.SGD([a, b], lr=0.1)
for step in range(100):
    loss = ((x @ a + b - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

np.save("pred.npy", (x @ a + b).detach().cpu().numpy())
print("saved", np.load("pred.npy").shape)
