"""Sequence tagger; the batches are padded by a collate_fn, the predictions are kept per batch."""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset


class Sentences(Dataset):
    def __init__(self, n=24):
        g = torch.Generator().manual_seed(0)
        self.items = [torch.randint(1, 30, (3 + i % 5,), generator=g) for i in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


def pad_batch(batch):
    return pad_sequence(batch, batch_first=True, padding_value=0)


def main():
    loader = DataLoader(Sentences(), batch_size=4, collate_fn=pad_batch)
    model = nn.Sequential(nn.Embedding(30, 8), nn.Linear(8, 3))
    predictions = []
    with torch.no_grad():
        for tokens in loader:
            predictions.append(model(tokens).argmax(-1))
    tags = torch.stack(predictions)
    print(tags.shape)


if __name__ == "__main__":
    main()
