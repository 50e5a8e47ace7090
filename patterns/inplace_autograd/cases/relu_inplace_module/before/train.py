import torch
from torch import nn

from model import build_scorer

torch.manual_seed(0)
features = torch.randn(24, 10)
labels = (features.sum(dim=1, keepdim=True) > 0).float()
scorer = build_scorer(10)
optimizer = torch.optim.SGD(scorer.parameters(), lr=0.1)
criterion = nn.BCEWithLogitsLoss()

for epoch in range(3):
    optimizer.zero_grad()
    loss = criterion(scorer(features), labels)
    loss.backward()
    optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
