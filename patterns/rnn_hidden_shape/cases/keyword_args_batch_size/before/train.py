"""Character RNN trained with an argparse batch size, its state sized by keyword."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class CharRNN(nn.Module):
    def __init__(self, n_chars=40, hidden=32):
        super().__init__()
        self.hidden = hidden
        self.embed = nn.Embedding(n_chars, hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, n_chars)

    def forward(self, x, h):
        out, h = self.rnn(self.embed(x), h)
        return self.head(out), h

    def init_hidden(self, batch_size):
        return torch.zeros(1, batch_size, self.hidden)


parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=4)
args = parser.parse_args()
text = TensorDataset(torch.randint(0, 40, (3, 16)), torch.randint(0, 40, (3, 16)))
loader = DataLoader(text, batch_size=2)
model = CharRNN()
optimizer = torch.optim.Adam(model.parameters())
for x, y in loader:
    h = model.init_hidden(batch_size=args.batch_size)
    logits, h = model(x, h)
    loss = nn.functional.cross_entropy(logits.transpose(1, 2), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
