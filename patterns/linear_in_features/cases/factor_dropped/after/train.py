import torch
import torch.nn as nn


class Critic(nn.Module):
    def __init__(self, obs_dim, d=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, d), nn.Tanh())
        self.value = nn.Linear(d, 1)

    def forward(self, obs):
        return self.value(self.body(obs))


torch.manual_seed(0)
critic = Critic(obs_dim=8)
optimizer = torch.optim.Adam(critic.parameters(), lr=3e-4)
obs, returns = torch.randn(4, 8), torch.randn(4, 1)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(critic(obs), returns)
    loss.backward()
    optimizer.step()
