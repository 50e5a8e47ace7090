"""Sentiment LSTM: a new hidden state for every batch, sized with the configured batch size."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class SentimentRNN(nn.Module):
    def __init__(self, vocab_size, output_size, embedding_dim, hidden_dim, n_layers):
        super().__init__()
        self.n_layers, self.hidden_dim = n_layers, hidden_dim
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, n_layers, batch_first=True)
        self.fc = nn.Linear(hidden_dim, output_size)

    def forward(self, x, hidden):
        embeds = self.embedding(x)
        lstm_out, hidden = self.lstm(embeds, hidden)
        return self.fc(lstm_out[:, -1]), hidden

    def init_hidden(self, batch_size):
        weight = next(self.parameters())
        return (weight.new_zeros(self.n_layers, batch_size, self.hidden_dim),
                weight.new_zeros(self.n_layers, batch_size, self.hidden_dim))


batch_size = 2
reviews = TensorDataset(torch.randint(0, 100, (3, 12)), torch.randint(0, 2, (3,)))
train_loader = DataLoader(reviews, shuffle=True, batch_size=batch_size)
net = SentimentRNN(100, 2, 16, 32, 2)
optimizer = torch.optim.Adam(net.parameters(), lr=0.001)
for epoch in range(2):
    for inputs, labels in train_loader:
        h = net.init_hidden(batch_size)
        output, h = net(inputs, h)
        loss = nn.functional.cross_entropy(output, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
