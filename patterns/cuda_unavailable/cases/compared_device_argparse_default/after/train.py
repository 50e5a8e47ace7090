import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda or cpu")
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

model = nn.Linear(4, 2)
if args.device == "cuda":
    model = model.cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(args.epochs):
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    if args.device == "cuda":
        x, y = x.cuda(), y.cuda()
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(loss.item())
