import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self, vocab=50, dim=16, tags=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.drop = nn.Dropout(
            p=0.1,
            inplace=True,
        )
        self.classify = nn.Linear(dim, tags)

    def forward(self, tokens):
        h = torch.sigmoid(self.embed(tokens))
        return self.classify(self.drop(h))


torch.manual_seed(0)
tagger = Tagger()
optimizer = torch.optim.Adam(tagger.parameters(), lr=1e-2)
tokens = torch.randint(0, 50, (8, 7))
tags = torch.randint(0, 5, (8, 7))
for step in range(3):
    optimizer.zero_grad()
    logits = tagger(tokens)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 5), tags.reshape(-1))
    loss.backward()
    optimizer.step()
print("loss", loss.item())
