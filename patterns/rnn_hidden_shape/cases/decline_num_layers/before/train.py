"""Seq2seq encoder with two layers whose initial state is built for one."""
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, hidden_size=64, num_layers=2):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(20, hidden_size)
        self.rnn = nn.LSTM(hidden_size, hidden_size, num_layers)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(1), self.hidden_size)
        c0 = torch.zeros(1, x.size(1), self.hidden_size)
        outputs, (hidden, cell) = self.rnn(self.embedding(x), (h0, c0))
        return hidden, cell


print(Encoder()(torch.randint(0, 20, (5, 1)))[0].shape)
