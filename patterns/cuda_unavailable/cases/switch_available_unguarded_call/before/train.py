import torch
import torch.nn as nn

use_cuda = torch.cuda.is_available()

model = nn.Linear(4, 2)
if use_cuda:
    model = model.cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    x, y = x.cuda(), y.cuda()
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(loss.item())
