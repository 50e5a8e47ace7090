"""Tabular classifier; the input normalisation was wrapped in no_grad together with the forward pass."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
features = torch.randn(128, 10) * 5 + 3
labels = (features[:, 0] > 3).long()
loader = DataLoader(TensorDataset(features, labels), batch_size=16, shuffle=True)
mean, std = features.mean(0), features.std(0)

model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

for epoch in range(2):
    for x, y in loader:
        with torch.no_grad():
            x = (x - mean) / std
            logits = model(x)
        loss = criterion(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.3f}")
