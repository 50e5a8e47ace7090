"""Language-model evaluation with its own eval_batch_size, over batches of another size."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

eval_batch_size = 10


class RNNModel(nn.Module):
    def __init__(self, ntoken=30, nhid=24):
        super().__init__()
        self.nhid = nhid
        self.encoder = nn.Embedding(ntoken, nhid)
        self.rnn = nn.LSTM(nhid, nhid, batch_first=True)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, data, hidden):
        output, hidden = self.rnn(self.encoder(data), hidden)
        return self.decoder(output), hidden

    def init_hidden(self, bsz):
        return torch.zeros(1, bsz, self.nhid), torch.zeros(1, bsz, self.nhid)


def evaluate(model, loader):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for data, targets in loader:
            hidden = model.init_hidden(data.size(0))
            output, hidden = model(data, hidden)
            total += nn.functional.cross_entropy(output.flatten(0, 1), targets.flatten()).item()
    return total


val = TensorDataset(torch.randint(0, 30, (8, 9)), torch.randint(0, 30, (8, 9)))
print(evaluate(RNNModel(), DataLoader(val, batch_size=2)))
