import torch
from torch import nn

NUM_CLASSES = 3

torch.manual_seed(0)
x = torch.randn(12, 10)
labels = torch.randint(0, NUM_CLASSES, (12,)).float()
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, NUM_CLASSES))
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(5):
    optimizer.zero_grad()
    logits = model(x)
    loss = criterion(logits, labels)
    loss.backward()
    optimizer.step()
