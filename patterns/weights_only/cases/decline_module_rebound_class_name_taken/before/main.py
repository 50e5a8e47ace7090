import argparse

import torch
import torch.nn as nn

import model

parser = argparse.ArgumentParser(description="a tiny word language model")
parser.add_argument("--save", type=str, default="model.pt", help="path to save the final model")
args = parser.parse_args()


class RNNModel(nn.Module):
    """The unigram baseline the language model is compared with."""

    def __init__(self, ntoken):
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(ntoken))

    def forward(self, input):
        return self.logits.expand(*input.shape, -1)


torch.manual_seed(0)
ntokens = 20
baseline = RNNModel(ntokens)
model = model.RNNModel(ntokens, 8, 8)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD([*model.parameters(), *baseline.parameters()], lr=0.5)

for step in range(3):
    data = torch.randint(0, ntokens, (6, 2))
    optimizer.zero_grad()
    loss = criterion(model(data[:-1]).view(-1, ntokens), data[1:].reshape(-1))
    loss = loss + criterion(baseline(data[:-1]).reshape(-1, ntokens), data[1:].reshape(-1))
    loss.backward()
    optimizer.step()

with open(args.save, "wb") as f:
    torch.save(model, f)

# Load the best saved model.
with open(args.save, "rb") as f:
    model = torch.load(f)

model.eval()
with torch.no_grad():
    data = torch.randint(0, ntokens, (6, 2))
    print("test loss", criterion(model(data[:-1]).view(-1, ntokens), data[1:].reshape(-1)).item())
