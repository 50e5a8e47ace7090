import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser(description="toy regression")
parser.add_argument("--cuda", action="store_true", default=True, help="use CUDA")
args = parser.parse_args()

device = torch.device("cuda:0" if args.cuda and torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 3, device=device), torch.randn(8, 1, device=device)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print(loss.item())
