import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(0)
table = rng.normal(size=(40, 4)).astype(np.float32)
X_train, y_train = table[:, :3], table[:, 3]

X_train = torch.from_numpy(X_train).float()
y_train = torch.from_numpy(y_train).float()
train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=8, shuffle=True)

model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

for epoch in range(3):
    total_error = 0.0
    for inputs, targets in train_loader:
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        total_error += (outputs.detach().squeeze(1) - targets).abs().sum().item()
    print(epoch, total_error / len(y_train))
