"""The state is made, then the tensor that would give its size is reshaped before the RNN sees
it: its size at the init_hidden call is not the one traced, so nothing is rewritten."""
import torch
import torch.nn as nn

batch_size = 4


class Reader(nn.Module):
    def __init__(self, vocab=40, emb=8, hidden=16):
        super().__init__()
        self.hidden_dim = hidden
        self.embedding = nn.Embedding(vocab, emb)
        self.rnn = nn.RNN(emb, hidden, batch_first=True)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.embedding(x), hidden)
        return out[:, -1], hidden

    def init_hidden(self, batch_size):
        return torch.zeros(1, batch_size, self.hidden_dim)


def encode(net, tokens):
    x = torch.tensor(tokens)
    h = net.init_hidden(batch_size)
    x = x.view(1, -1)
    out, h = net(x, h)
    return out


print(encode(Reader(), [3, 5, 7, 9, 11, 13, 15, 17]))
