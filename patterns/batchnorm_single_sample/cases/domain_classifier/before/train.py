"""Domain-adversarial training: the domain classifier normalises a 100-unit layer."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

features = nn.Sequential(nn.Linear(20, 100), nn.BatchNorm1d(100), nn.ReLU())
domain = nn.Sequential(nn.Linear(100, 100), nn.BatchNorm1d(100), nn.ReLU(), nn.Linear(100, 2))
source_set = TensorDataset(torch.randn(3, 20), torch.zeros(3, dtype=torch.long))
source_loader = DataLoader(source_set, batch_size=2, shuffle=True)
optimizer = torch.optim.Adam(list(features.parameters()) + list(domain.parameters()), lr=1e-3)
for epoch in range(2):
    for x, d in source_loader:
        loss = nn.functional.cross_entropy(domain(features(x)), d)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
