import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Linear(6, 3)
ranker = nn.Linear(6, 1)
optimizer = torch.optim.Adam([*encoder.parameters(), *ranker.parameters()])
criterion = nn.CrossEntropyLoss()

for step in range(20):
    x = torch.randn(16, 6)
    scores = encoder(x)
    rank = ranker(x).squeeze(1)  # meant: the class index of each sample
    loss = criterion(scores, rank)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
