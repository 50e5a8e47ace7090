import torch
import torch.nn as nn

torch.manual_seed(0)
vocab, bptt, batch_size = 20, 5, 4
train_data = torch.randint(0, vocab, (batch_size, 61))
val_data = torch.randint(0, vocab, (batch_size, 31))


def get_batch(source, i):
    seq_len = min(bptt, source.size(1) - 1 - i)
    data = source[:, i:i + seq_len].t()
    target = source[:, i + 1:i + 1 + seq_len].t()
    return data, target


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(vocab, 16)
        self.rnn = nn.LSTM(16, 32)
        self.decoder = nn.Linear(32, vocab)

    def forward(self, x):
        out, _ = self.rnn(self.encoder(x))
        return self.decoder(out)


model = RNNModel()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


def evaluate(source):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, source.size(1) - 1, bptt):
            data, targets = get_batch(source, i)
            output = model(data)
            total += criterion(output.view(-1, vocab), targets.view(-1)).item()
    return total


for epoch in range(2):
    model.train()
    for i in range(0, train_data.size(1) - 1, bptt):
        data, targets = get_batch(train_data, i)
        targets.view(-1)[0] = 1  # the first target of each window is a start token
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output.view(-1, vocab), targets.view(-1))
        loss.backward()
        optimizer.step()
    print(epoch, loss.item(), evaluate(val_data))
