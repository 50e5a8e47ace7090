import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, in_dim, hidden, num_classes=10):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, 2 * hidden)
        self.fc2 = nn.Linear(2 * hidden, num_classes)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(0)
model = MLP(in_dim=20, hidden=64)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 20), torch.randint(0, 10, (8,))
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
