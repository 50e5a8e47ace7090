import torch
import torch.nn as nn
from types import SimpleNamespace

cfg = SimpleNamespace(emb=8, vocab=20)


class WindowClassifier(nn.Module):
    def __init__(self, cfg, seq_len=5):
        super().__init__()
        self.seq_len = seq_len
        self.embed = nn.Embedding(cfg.vocab, cfg.emb)
        self.out = nn.Linear(self.seq_len * cfg.emb, 3)

    def forward(self, tokens):
        return self.out(self.embed(tokens).flatten(1))


torch.manual_seed(0)
model = WindowClassifier(cfg)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
tokens, labels = torch.randint(0, 20, (4, 5)), torch.randint(0, 3, (4,))
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(tokens), labels)
    loss.backward()
    optimizer.step()
