import torch
a = torch.zeros(3)
b = torch.zeros(4)
for i in range(2):
    x = torch.stack([a, b])
