import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, input_size, hidden=32):
        super().__init__()
        self.fc = nn.Linear(2 * input_size, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.out(self.fc(x).relu())
