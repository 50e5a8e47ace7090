import torch
from torch import nn

load_kwargs = {"weights_only": True}

model = nn.Linear(4, 2)
state = torch.load("weights.pt", **load_kwargs)
model.load_state_dict(state)

optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
