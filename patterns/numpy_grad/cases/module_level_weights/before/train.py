"""Fit y = 3x - 1 with one linear unit and print the learned weights."""
import torch

torch.manual_seed(0)
x = torch.linspace(-1, 1, 50).unsqueeze(1)
y = 3 * x - 1

model = torch.nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(15):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()

print("weight:", model.weight.numpy().round(3), "bias:", model.bias.detach().numpy().round(3))
