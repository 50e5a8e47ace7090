import torch
from torch import nn


class ScratchRNN(nn.Module):
    def __init__(self, n_in, n_hidden):
        super().__init__()
        self.W_xh = nn.Linear(n_in, n_hidden)
        self.W_hh = nn.Parameter(torch.randn(n_hidden, n_hidden) * 0.1)
        self.head = nn.Linear(n_hidden, 1)

    def forward(self, x):
        B, T, _ = x.shape
        outputs = torch.zeros(B, T, self.W_hh.shape[0])
        for t in range(1, T):
            h = torch.tanh(self.W_xh(x[:, t]) + outputs[:, t - 1].clone() @ self.W_hh)
            outputs[:, t] = h
        return self.head(outputs[:, -1])


torch.manual_seed(0)
model = ScratchRNN(3, 5)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(4, 6, 3), torch.randn(4, 1)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print("loss", loss.item())
