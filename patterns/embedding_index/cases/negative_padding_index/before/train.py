"""Bag-of-words classifier; short documents are padded with -1."""
import torch
import torch.nn as nn

PAD = -1
VOCAB = 20


class BagClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.out = nn.Linear(16, 2)

    def forward(self, ids):
        return self.out(self.embed(ids).mean(1))


def pad(docs, length):
    return torch.tensor([doc + [PAD] * (length - len(doc)) for doc in docs])


docs = [[3, 7, 1], [4, 4, 9, 12, 5], [2], [8, 8]]
labels = torch.tensor([0, 1, 0, 1])
model = BagClassifier()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    logits = model(pad(docs, 5))
    loss = nn.functional.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
