import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--cpu", action="store_true", help="run on the CPU")
args = parser.parse_args()

model = nn.Linear(4, 2)
if args.cpu:
    state = torch.load("model.pt", map_location="cpu")
else:
    state = torch.load("model.pt")
model.load_state_dict(state)
print(model(torch.randn(2, 4)))
