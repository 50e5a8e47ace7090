"""Multi-label tagging of short texts (bag of words in, a set of tags out)."""
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocab=50, tags=6):
        super().__init__()
        self.score = nn.Linear(vocab, tags)

    def forward(self, bags):
        return self.score(bags)


def train(model, bags, tags, epochs=5):
    criterion = nn.MultiLabelMarginLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(epochs):
        loss = criterion(model(bags), tags)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


torch.manual_seed(0)
bags = torch.rand(40, 50)
tags = (torch.rand(40, 6) > 0.7).float()  # multi-hot rows
train(Tagger(), bags, tags)
