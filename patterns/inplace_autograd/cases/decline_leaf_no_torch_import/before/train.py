import torch

from updates import sgd

torch.manual_seed(0)
x = torch.randn(30, 2)
y = (x[:, 0] > x[:, 1]).float()
w = torch.zeros(2, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
for step in range(10):
    p = torch.sigmoid(x @ w + b)
    loss = -(y * p.log() + (1 - y) * (1 - p).log()).mean()
    loss.backward()
    sgd([w, b], lr=0.5)
print("loss", loss.item())
