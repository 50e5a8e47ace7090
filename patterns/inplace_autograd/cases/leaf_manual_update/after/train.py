import torch

torch.manual_seed(0)
x = torch.randn(64, 3)
y = x @ torch.tensor([1.5, -2.0, 0.5]) + 0.3

w = torch.zeros(3, requires_grad=True)
lr = 0.1
for step in range(20):
    pred = x @ w
    loss = ((pred - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
    w.grad.zero_()
print("w", [round(v, 3) for v in w.tolist()])
