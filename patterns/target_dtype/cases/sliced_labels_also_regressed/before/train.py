"""Grades as classes and as numbers: one float label tensor, sliced, feeds both heads."""

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(0)
grades = rng.integers(0, 5, size=100)
features = torch.from_numpy(rng.normal(size=(100, 6)) + grades[:, None]).type(torch.float)
labels = torch.from_numpy(grades).type(torch.float)

split = 80
x_train, y_train = features[:split], labels[:split]

classify = nn.Linear(6, 5)
regress = nn.Linear(6, 1)
optimizer = torch.optim.SGD(list(classify.parameters()) + list(regress.parameters()), lr=0.05)
ce, mse = nn.CrossEntropyLoss(), nn.MSELoss()

for epoch in range(20):
    loss = ce(classify(x_train), y_train) + mse(regress(x_train).squeeze(1), y_train)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
