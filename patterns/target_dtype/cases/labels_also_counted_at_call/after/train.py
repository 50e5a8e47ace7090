import torch
import torch.nn as nn

torch.manual_seed(0)
features = torch.randn(32, 6)
labels = (features[:, 0] > 0).to(torch.long)
model = nn.Linear(6, 1)
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
print("class counts:", torch.bincount(labels).tolist())
for epoch in range(3):
    optimizer.zero_grad()
    loss = criterion(model(features).squeeze(1), labels.float())
    loss.backward()
    optimizer.step()
print(loss.item())
