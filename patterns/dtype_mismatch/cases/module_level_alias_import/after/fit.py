# Linear regression by hand on a small table of house prices.
import numpy as np
import torch as T

rng = np.random.default_rng(7)
table = rng.uniform(0.0, 1.0, size=(64, 3))
prices = table @ np.array([3.0, -1.0, 2.0]) + 0.5

X = T.tensor(table, dtype=T.float32)
y = T.tensor(prices, dtype=T.float32)
W = T.zeros(3, requires_grad=True)
b = T.zeros(1, requires_grad=True)
optimizer = T.optim.SGD([W, b], lr=0.1)

for step in range(200):
    optimizer.zero_grad()
    predicted = X @ W + b
    loss = ((predicted - y) ** 2).mean()
    loss.backward()
    optimizer.step()

print(f"W = {W.tolist()}, b = {b.item():.3f}")
