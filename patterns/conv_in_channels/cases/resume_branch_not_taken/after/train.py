"""Train a small CNN on grayscale scans; --resume continues from a saved checkpoint."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(torch.relu(self.conv1(x)).mean((2, 3)))


parser = argparse.ArgumentParser()
parser.add_argument("--resume", action="store_true")
args = parser.parse_args()

model = Net()
if args.resume and os.path.exists("checkpoint.pt"):
    model.load_state_dict(torch.load("checkpoint.pt"))
data = DataLoader(TensorDataset(torch.rand(8, 1, 16, 16), torch.randint(0, 2, (8,))), batch_size=4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in data:
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
torch.save(model.state_dict(), "checkpoint.pt")
