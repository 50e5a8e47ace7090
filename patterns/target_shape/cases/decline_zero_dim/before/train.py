import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

# online learning: one sample at a time
stream = [(torch.randn(1, 4), torch.tensor([1.0])) for _ in range(5)]
for x, y in stream:
    logit = model(x).squeeze()  # (1, 1) -> (): the batch dimension goes too
    loss = criterion(logit, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
