import torch
from torch import nn

CHECKPOINT = 'ckpt/model.pt'


def restore(model):
    ckpt = torch.load(CHECKPOINT, map_location='cpu')
    model.load_state_dict(ckpt['model'])
    return ckpt['step']


model = nn.Linear(4, 2)
step = restore(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
for _ in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    step += 1
print('step', step, 'loss', loss.item())
