import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.rnn = nn.GRU(4, hidden_size, bidirectional=True)
        self.fc_hidden = nn.Linear(hidden_size * 2, hidden_size)

    def forward(self, x):
        states, hidden = self.rnn(x)
        return states, self.fc_hidden(torch.cat((hidden[0], hidden[1]), dim=1))


class Scorer(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.energy = nn.Linear(hidden_size * 3, 1)
        self.fc = nn.Linear(hidden_size, 1)

    def forward(self, states, hidden):
        h = hidden.repeat(states.shape[0], 1, 1)
        weights = torch.softmax(self.energy(torch.cat((h, states), dim=2)), dim=0)
        return self.fc(hidden) + (weights * states).sum()


hidden_size = 32
scorer_hidden_size = 32
torch.manual_seed(0)
encoder, scorer = Encoder(hidden_size), Scorer(scorer_hidden_size)
optimizer = torch.optim.Adam([*encoder.parameters(), *scorer.parameters()], lr=1e-3)
x, y = torch.randn(5, 3, 4), torch.randn(3, 1)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(scorer(*encoder(x)), y)
    loss.backward()
    optimizer.step()
print("ok", loss.item())
