import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def make_train_step_fn(model, loss_fn, optimizer):
    def perform_train_step_fn(x, y):
        model.train()
        yhat = model(x)
        loss = loss_fn(yhat, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.item()

    return perform_train_step_fn


np.random.seed(42)
x = np.random.rand(40, 1)
y = 1 + 2 * x + 0.1 * np.random.randn(40, 1)
x_tensor = torch.from_numpy(x).float()
y_tensor = torch.from_numpy(y).float()
loader = DataLoader(TensorDataset(x_tensor, y_tensor), batch_size=8, shuffle=True)

model = nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_step_fn = make_train_step_fn(model, nn.MSELoss(), optimizer)
for epoch in range(3):
    for x_batch, y_batch in loader:
        loss = train_step_fn(x_batch, y_batch)
print(loss)
