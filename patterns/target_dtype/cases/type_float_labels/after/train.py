"""Sentiment from bag-of-words counts; labels read with the features as one float table."""

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(0)
counts = rng.poisson(1.0, size=(64, 20))
stars = rng.integers(0, 3, size=64)

features = torch.from_numpy(counts).type(torch.float)
targets = torch.from_numpy(stars).type(torch.long)

model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 3))
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(30):
    logits = model(features)
    loss = loss_fn(logits, targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    accuracy = (logits.argmax(1) == targets).float().mean()
    print(epoch, loss.item(), accuracy.item(), len(targets))
