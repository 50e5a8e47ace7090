"""A small GRU tagger."""
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocab_size, n_tags, dim=32):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, n_tags)

    def forward(self, tokens):
        hidden, _ = self.rnn(self.embed(tokens))
        return self.out(hidden)
