"""predict() makes the state for one review with the training batch size: the state is made in
the failing function itself, so it takes the size of the tensor that function holds."""
import torch
import torch.nn as nn

batch_size = 4


class SentimentRNN(nn.Module):
    def __init__(self, vocab=40, emb=8, hidden=16, n_layers=2):
        super().__init__()
        self.n_layers, self.hidden_dim = n_layers, hidden
        self.embedding = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, n_layers, batch_first=True)
        self.fc = nn.Linear(hidden, 1)

    def forward(self, x, hidden):
        out, hidden = self.lstm(self.embedding(x), hidden)
        return torch.sigmoid(self.fc(out[:, -1])), hidden

    def init_hidden(self, batch_size):
        weight = next(self.parameters())
        return (weight.new_zeros(self.n_layers, batch_size, self.hidden_dim),
                weight.new_zeros(self.n_layers, batch_size, self.hidden_dim))


def predict(net, tokens):
    net.eval()
    feature_tensor = torch.tensor([tokens])
    h = net.init_hidden(feature_tensor.size(0))
    feature_tensor = feature_tensor.long()
    output, h = net(feature_tensor, h)
    return output.item()


print(predict(SentimentRNN(), [3, 5, 7, 9, 11]))
