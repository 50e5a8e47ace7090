import numpy as np
import torch
from torch import nn

from losses import classification_loss

rng = np.random.default_rng(0)
tokens = rng.normal(size=(64, 12)).astype(np.float32)
classes = rng.integers(0, 4, size=64).astype(np.int32)  # the export tool writes int32

inputs = torch.from_numpy(tokens)
targets = torch.from_numpy(classes)

model = nn.Sequential(nn.Linear(12, 4), nn.LogSoftmax(dim=1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def step(batch, batch_targets):
    optimizer.zero_grad()
    loss = classification_loss(model(batch), batch_targets)
    loss.backward()
    optimizer.step()
    return loss.item()


for start in range(0, 64, 16):
    print(step(inputs[start : start + 16], targets[start : start + 16]))
