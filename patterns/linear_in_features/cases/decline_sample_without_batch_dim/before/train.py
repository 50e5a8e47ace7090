import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CnnDQN(nn.Module):
    def __init__(self, n_actions):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc1 = nn.Linear(16 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, n_actions)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = x.view(x.size(0), -1)
        return self.fc2(F.relu(self.fc1(x)))

    def act(self, state):
        state = torch.FloatTensor(np.float32(state))
        q_value = self.forward(state)
        return q_value.max(1)[1].item()


torch.manual_seed(0)
model = CnnDQN(n_actions=4)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    state = np.random.rand(1, 8, 8)
    action = model.act(state)
    batch = torch.randn(4, 1, 8, 8)
    loss = model(batch).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("action", action)
