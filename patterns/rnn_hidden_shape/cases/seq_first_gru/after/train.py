"""News classifier with a sequence-first GRU: batches are collated as [time, batch]."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

BATCH_SIZE = 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 8)
        self.gru = nn.GRU(8, 16)
        self.out = nn.Linear(16, 4)

    def forward(self, text, hidden):
        output, hidden = self.gru(self.emb(text), hidden)
        return self.out(hidden[-1])

    def initHidden(self, batch_size):
        return torch.zeros(1, batch_size, 16)


def collate(batch):
    return torch.stack([t for t, _ in batch], 1), torch.tensor([c for _, c in batch])


samples = [(torch.randint(0, 50, (7,)), i % 4) for i in range(3)]
loader = DataLoader(samples, batch_size=BATCH_SIZE, collate_fn=collate)
net = Net()
optim = torch.optim.SGD(net.parameters(), lr=0.1)
for epoch in range(2):
    for text, labels in loader:
        hidden = net.initHidden(text.size(1))
        loss = nn.functional.cross_entropy(net(text, hidden), labels)
        optim.zero_grad()
        loss.backward()
        optim.step()
