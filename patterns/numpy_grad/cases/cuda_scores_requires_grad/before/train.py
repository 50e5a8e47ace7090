"""Anomaly scores of a small autoencoder, trained on the GPU when there is one."""
import torch
import torch.nn as nn

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
data = torch.randn(256, 16).to(device)
model = nn.Sequential(nn.Linear(16, 4), nn.ReLU(), nn.Linear(4, 16)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for step in range(10):
    optimizer.zero_grad()
    loss = (model(data) - data).pow(2).mean()
    loss.backward()
    optimizer.step()

scores = (model(data) - data).pow(2).mean(dim=1)
threshold = scores.numpy().mean() + 2 * scores.numpy().std()
print(f"{(scores.numpy() > threshold).sum()} anomalies above {threshold:.3f}")
