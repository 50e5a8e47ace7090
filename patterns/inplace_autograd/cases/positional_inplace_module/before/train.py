import torch
import torch.nn as nn


class Critic(nn.Module):
    def __init__(self, state_dim=6):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(state_dim, 16), nn.Tanh(), nn.LeakyReLU(0.2, True))
        self.value = nn.Linear(16, 1)

    def forward(self, state):
        return self.value(self.body(state))


torch.manual_seed(0)
critic = Critic()
optimizer = torch.optim.RMSprop(critic.parameters(), lr=1e-3)
states = torch.randn(12, 6)
returns = torch.randn(12, 1)
for update in range(3):
    optimizer.zero_grad()
    loss = nn.functional.smooth_l1_loss(critic(states), returns)
    loss.backward()
    optimizer.step()
print("value loss", loss.item())
