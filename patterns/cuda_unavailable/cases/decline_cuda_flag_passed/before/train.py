import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--cuda", action="store_true", help="train on the GPU")
args = parser.parse_args()

model = nn.Linear(4, 2)
if args.cuda:
    model.cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    if args.cuda:
        x, y = x.cuda(), y.cuda()
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(loss.item())
