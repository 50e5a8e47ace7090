import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
emails = torch.randn(200, 20)
is_spam = (emails[:, 0] > 0.5).long()  # 0/1 labels, as integers

model = nn.Sequential(nn.Linear(20, 1), nn.Flatten(0))
loss_fn = nn.BCEWithLogitsLoss()
optimizer = torch.optim.Adam(model.parameters())

for x, y in DataLoader(TensorDataset(emails, is_spam), batch_size=25, shuffle=True):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y.float())
    loss.backward()
    optimizer.step()
