"""Truncated BPTT inside one function: the state is made once per call, before the loop over
batches, and carried from batch to batch (repackage_hidden); the last, smaller batch cannot reuse
it. The batch is bound in the loop, so the state is not made per batch: never re-made, diagnosed."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

batch_size = 4


class LM(nn.Module):
    def __init__(self, ntoken=30, nhid=16):
        super().__init__()
        self.nhid = nhid
        self.encoder = nn.Embedding(ntoken, nhid)
        self.rnn = nn.LSTM(nhid, nhid, batch_first=True)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, data, hidden):
        output, hidden = self.rnn(self.encoder(data), hidden)
        return self.decoder(output), hidden

    def init_hidden(self, bsz):
        return torch.zeros(1, bsz, self.nhid), torch.zeros(1, bsz, self.nhid)


def repackage_hidden(h):
    return tuple(v.detach() for v in h)


def train(model, loader, optimizer):
    hidden = model.init_hidden(batch_size)
    for data, targets in loader:
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = nn.functional.cross_entropy(output.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


model = LM()
stream = TensorDataset(torch.randint(0, 30, (10, 5)), torch.randint(0, 30, (10, 5)))
train(model, DataLoader(stream, batch_size=batch_size), torch.optim.SGD(model.parameters(), lr=0.1))
