import torch
from torch import nn

device = torch.device("cuda:0")

model = nn.Linear(4, 2)
model.load_state_dict(torch.load("model.pt", map_location=device))
model.to(device)
print(model(torch.randn(2, 4, device=device)))
