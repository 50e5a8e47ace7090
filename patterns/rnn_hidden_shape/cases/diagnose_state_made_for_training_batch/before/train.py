"""graykode TextRNN style: the state is made as torch.zeros(1, batch_size, n_hidden) for the
training batch (3 sentences) and made the same way for a prediction on one phrase."""
import torch
import torch.nn as nn

n_class, n_hidden, batch_size = 7, 5, 3


class TextRNN(nn.Module):
    def __init__(self):
        super(TextRNN, self).__init__()
        self.rnn = nn.RNN(input_size=n_class, hidden_size=n_hidden)
        self.W = nn.Linear(n_hidden, n_class, bias=False)

    def forward(self, hidden, X):
        X = X.transpose(0, 1)
        outputs, hidden = self.rnn(X, hidden)
        return self.W(outputs[-1])


model = TextRNN()
input_batch = torch.rand(batch_size, 2, n_class)
hidden = torch.zeros(1, batch_size, n_hidden)
output = model(hidden, input_batch)

test_batch = torch.rand(1, 2, n_class)
hidden = torch.zeros(1, batch_size, n_hidden)
predict = model(hidden, test_batch).data.max(1, keepdim=True)[1]
