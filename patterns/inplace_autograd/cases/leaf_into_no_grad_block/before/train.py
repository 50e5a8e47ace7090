import torch


def sgd_step(w, b, lr):
    with torch.no_grad():
        w -= lr * w.grad
    b -= lr * b.grad


torch.manual_seed(0)
x = torch.randn(50, 4)
y = x.sum(dim=1) * 0.5 - 1.0
w = torch.zeros(4, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
for step in range(10):
    loss = ((x @ w + b - y) ** 2).mean()
    loss.backward()
    sgd_step(w, b, lr=0.1)
    w.grad = None
    b.grad = None
print("loss", loss.item())
