import numpy as np
import torch


def init_weights(n_in, n_out, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(scale=0.1, size=(n_in, n_out))


x = torch.randn(32, 3)
y = x.sum(dim=1, keepdim=True)
w = torch.tensor(init_weights(3, 1), requires_grad=True)
b = torch.zeros(1, requires_grad=True)
for step in range(5):
    pred = x @ w + b
    loss = ((pred - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        b -= 0.1 * b.grad
        w.grad.zero_()
        b.grad.zero_()
print(loss.item())
