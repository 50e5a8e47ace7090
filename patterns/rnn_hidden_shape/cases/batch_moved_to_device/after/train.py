"""A new state for every batch after the batch is moved to the device, and a validation pass
further down the same loop that rebinds the loop's names: neither changes the batch's size."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cpu")
batch_size = 2


class Tagger(nn.Module):
    def __init__(self, vocab=50, emb=8, hidden=12):
        super().__init__()
        self.hidden = hidden
        self.embedding = nn.Embedding(vocab, emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 2)

    def forward(self, x, h):
        output, h = self.gru(self.embedding(x), h)
        return self.out(output[:, -1]), h

    def init_hidden(self, batch_size):
        return torch.zeros(1, batch_size, self.hidden, device=device)


train = DataLoader(TensorDataset(torch.randint(0, 50, (5, 7)), torch.randint(0, 2, (5,))), batch_size=batch_size)
valid = DataLoader(TensorDataset(torch.randint(0, 50, (2, 7)), torch.randint(0, 2, (2,))), batch_size=batch_size)
model = Tagger().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (inputs, labels) in enumerate(train):
    inputs, labels = inputs.to(device), labels.to(device)
    h = model.init_hidden(inputs.size(0))
    output, h = model(inputs, h)
    loss = nn.functional.cross_entropy(output, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 2 == 1:
        with torch.no_grad():
            for inputs, labels in valid:
                output, _ = model(inputs, model.init_hidden(inputs.size(0)))
