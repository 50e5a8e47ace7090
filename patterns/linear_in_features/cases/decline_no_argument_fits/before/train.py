import argparse

import torch

from modules import Encoder

parser = argparse.ArgumentParser()
parser.add_argument("--features", type=int, default=8)
args = parser.parse_args()

torch.manual_seed(0)
model = Encoder(input_size=6)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 2 * args.features - 1)  # one feature dropped
y = torch.randn(4, 1)
for step in range(3):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print("ok", loss.item())
