import torch
from torch import nn


class TinyRNN(nn.Module):
    """An Elman RNN unrolled by hand, its states kept in one [batch, steps + 1, hidden] tensor."""

    def __init__(self, n_in=3, hidden=5):
        super().__init__()
        self.hidden = hidden
        self.W_x = nn.Linear(n_in, hidden)
        self.W_h = nn.Parameter(torch.randn(hidden, hidden) * 0.1)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        steps = x.shape[1]
        h = torch.zeros(x.shape[0], steps + 1, self.hidden)
        for t in range(1, steps + 1):
            h[:, t] = torch.tanh(self.W_x(x[:, t - 1]) + h[:, t - 1] @ self.W_h)
        return self.head(h[:, -1])


torch.manual_seed(0)
model = TinyRNN()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(3):
    x, y = torch.randn(4, 6, 3), torch.randn(4, 1)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print("final loss", loss.item())
