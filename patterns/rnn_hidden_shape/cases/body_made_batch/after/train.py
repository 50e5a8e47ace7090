"""Generation makes its batch in the loop body, then a new state for it with the training
batch size: the batch made before the call gives the size."""
import torch
import torch.nn as nn

batch_size = 3


class Generator(nn.Module):
    def __init__(self, vocab=20, emb=8, hidden=12):
        super().__init__()
        self.hidden_dim = hidden
        self.embedding = nn.Embedding(vocab, emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, vocab)

    def forward(self, x, hidden):
        out, hidden = self.gru(self.embedding(x), hidden)
        return self.fc(out[:, -1]), hidden

    def init_hidden(self, batch_size):
        return torch.zeros(1, batch_size, self.hidden_dim)


def generate(net, prime, steps=5):
    words = list(prime)
    for _ in range(steps):
        seq = torch.tensor([words[-4:]])
        hidden = net.init_hidden(seq.size(0))
        logits, _ = net(seq, hidden)
        words.append(int(logits.argmax(1)))
    return words


print(generate(Generator(), [1, 2, 3, 4]))
