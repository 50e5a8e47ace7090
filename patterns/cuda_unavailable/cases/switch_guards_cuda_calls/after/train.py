import torch
import torch.nn as nn

use_cuda = torch.cuda.is_available()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


net = Net()
if use_cuda:
    net.cuda()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)


def train(batches):
    for inputs, targets in batches:
        if use_cuda:
            inputs, targets = inputs.cuda(), targets.cuda()
        optimizer.zero_grad()
        loss = criterion(net(inputs), targets)
        loss.backward()
        optimizer.step()
    return loss.item()


print(train([(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(3)]))
