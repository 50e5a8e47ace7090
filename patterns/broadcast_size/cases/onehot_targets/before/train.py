"""Weakly supervised action classification: scores for 101 classes, labels one-hot over 20."""
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 101))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
features = torch.randn(16, 32)
labels = torch.nn.functional.one_hot(torch.randint(0, 20, (16,)), 20).float()

for epoch in range(2):
    for i in range(0, 16, 4):
        scores = model(features[i:i + 4])
        target = labels[i:i + 4]
        loss = ((torch.sigmoid(scores) - target) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
