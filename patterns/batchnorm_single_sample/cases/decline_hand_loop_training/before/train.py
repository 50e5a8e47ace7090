"""Mini-batches sliced by hand: 5 samples in slices of 2 leave a last slice of one."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.Adam(model.parameters())
X, Y = torch.randn(5, 8), torch.randint(0, 2, (5,))
batch_size = 2

for epoch in range(2):
    model.train()
    permutation = torch.randperm(X.shape[0])
    for i in range(0, X.shape[0], batch_size):
        index = permutation[i:i + batch_size]
        out = model(X[index])
        loss = nn.functional.cross_entropy(out, Y[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
