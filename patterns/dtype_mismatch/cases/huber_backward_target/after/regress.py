import numpy as np
import torch
import torch.nn as nn

from model import RentModel

rng = np.random.default_rng(3)
areas = rng.uniform(20, 120, size=(128, 1))
rents = 8.0 * areas + rng.normal(scale=20.0, size=areas.shape)

features = torch.tensor((areas - areas.mean()) / areas.std(), dtype=torch.float32)
rent = torch.from_numpy(rents / 1000.0).float()

model = RentModel()
loss_fn = nn.HuberLoss(delta=0.5)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

for epoch in range(50):
    optimizer.zero_grad()
    loss = loss_fn(model(features), rent)
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.4f}")
