"""Sentiment LSTM whose state is made once per epoch and carried from batch to batch."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class SentimentRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(100, 16)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.fc = nn.Linear(32, 2)

    def forward(self, x, hidden):
        lstm_out, hidden = self.lstm(self.embedding(x), hidden)
        return self.fc(lstm_out[:, -1]), hidden

    def init_hidden(self, batch_size):
        return torch.zeros(1, batch_size, 32), torch.zeros(1, batch_size, 32)


batch_size = 2
train_loader = DataLoader(TensorDataset(torch.randint(0, 100, (3, 12)), torch.randint(0, 2, (3,))), batch_size=batch_size)
net = SentimentRNN()
optimizer = torch.optim.Adam(net.parameters())
for epoch in range(2):
    h = net.init_hidden(batch_size)
    for inputs, labels in train_loader:
        h = tuple(each.data for each in h)
        output, h = net(inputs, h)
        loss = nn.functional.cross_entropy(output, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
