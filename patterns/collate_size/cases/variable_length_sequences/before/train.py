"""Sentiment classifier over token-id sequences of different lengths."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

VOCAB = 50


class Reviews(Dataset):
    def __init__(self, n=64, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.samples = []
        for i in range(n):
            length = 5 + i % 7
            tokens = torch.randint(1, VOCAB, (length,), generator=g)
            self.samples.append((tokens, i % 2))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        tokens, label = self.samples[idx]
        return tokens, label


class BagOfEmbeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.out = nn.Linear(16, 2)

    def forward(self, tokens):
        return self.out(self.embed(tokens).mean(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    loader = DataLoader(Reviews(), batch_size=args.batch_size)
    model = BagOfEmbeddings()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for tokens, labels in loader:
        loss = nn.functional.cross_entropy(model(tokens), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
