"""char-rnn style: train(inp, target) makes a new state with args.batch_size for every call, then
steps through the chunk one character at a time; a batch of another size gets inp.size(0)."""
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--chunk_len", type=int, default=6)
args = parser.parse_args()


class CharRNN(nn.Module):
    def __init__(self, n_chars=30, hidden_size=16, n_layers=2):
        super().__init__()
        self.hidden_size, self.n_layers = hidden_size, n_layers
        self.encoder = nn.Embedding(n_chars, hidden_size)
        self.rnn = nn.GRU(hidden_size, hidden_size, n_layers)
        self.decoder = nn.Linear(hidden_size, n_chars)

    def forward(self, input, hidden):
        batch_size = input.size(0)
        encoded = self.encoder(input)
        output, hidden = self.rnn(encoded.view(1, batch_size, -1), hidden)
        return self.decoder(output.view(batch_size, -1)), hidden

    def init_hidden(self, batch_size):
        return torch.zeros(self.n_layers, batch_size, self.hidden_size)


decoder = CharRNN()
optimizer = torch.optim.Adam(decoder.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()


def train(inp, target):
    hidden = decoder.init_hidden(args.batch_size)
    decoder.zero_grad()
    loss = 0
    for c in range(args.chunk_len):
        output, hidden = decoder(inp[:, c], hidden)
        loss += criterion(output, target[:, c])
    loss.backward()
    optimizer.step()
    return loss.item() / args.chunk_len


text = torch.randint(0, 30, (11, args.chunk_len + 1))
for start in range(0, len(text), args.batch_size):
    chunk = text[start:start + args.batch_size]
    print(train(chunk[:, :-1], chunk[:, 1:]))
