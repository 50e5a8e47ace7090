import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocab_size, emb_size, hid_size, n_tags):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, emb_size)
        self.rnn = nn.GRU(emb_size, hid_size, batch_first=True)
        self.out = nn.Linear(hid_size, n_tags)

    def forward(self, tokens):
        states, _ = self.rnn(self.emb(tokens))
        return self.out(states)


torch.manual_seed(0)
model = Tagger(vocab_size=30, emb_size=16, hid_size=24, n_tags=5)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
tokens, tags = torch.randint(0, 30, (4, 6)), torch.randint(0, 5, (4, 6))
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(tokens).flatten(0, 1), tags.flatten())
    loss.backward()
    optimizer.step()
