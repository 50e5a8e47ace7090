import torch.nn as nn


class CRNN(nn.Module):
    def __init__(self, num_class, hidden=32):
        super().__init__()
        self.rnn = nn.LSTM(16, hidden, bidirectional=True)
        self.fc = nn.Linear(hidden * 2, num_class)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out)
