import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

model = nn.Linear(4, 2)
model.load_state_dict(torch.load("weights.pt"))
model.to(device)

optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4, device=device), torch.randint(0, 2, (8,), device=device)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print("loss", loss.item())
