import torch
from torch import nn

WEIGHTS = "weights.pt"

model = nn.Linear(4, 2)
state = torch.load(
    WEIGHTS,
    weights_only=True,
    map_location="cpu",
)
model.load_state_dict(state)

optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print("loss", loss.item())
