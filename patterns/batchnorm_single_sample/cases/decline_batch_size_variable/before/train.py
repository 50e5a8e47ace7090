"""rasbt-style MLP trained one digit per update: batch_size = 1 is a setting, given to the
loader by name, so every batch (after a first one printed to check the shapes) has one sample."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

batch_size = 1  # one digit per update
train_dataset = TensorDataset(torch.rand(4, 784), torch.randint(0, 10, (4,)))
train_loader = DataLoader(dataset=train_dataset,
                          batch_size=batch_size,
                          shuffle=True)

# Checking the dataset
for images, labels in train_loader:
    print('Image batch dimensions:', images.shape)
    break

model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.BatchNorm1d(128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model.train()
for batch_idx, (features, targets) in enumerate(train_loader):
    cost = F.cross_entropy(model(features), targets)
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()
