import torch
from torch import nn

from model import build_classifier

torch.manual_seed(0)
model = build_classifier()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
images = torch.randn(16, 1, 12, 12)
targets = torch.randint(0, 10, (16,))

for step in range(5):
    optimizer.zero_grad()
    logits = model(images)
    loss = nn.functional.cross_entropy(logits, targets)
    loss.backward()
    optimizer.step()
print("final loss", loss.item())
