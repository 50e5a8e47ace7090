"""Two heads on one trunk: a class head and a head that regresses the class number as a value."""

import torch
import torch.nn.functional as F

n_features, n_classes = 6, 3
trunk = torch.nn.Sequential(torch.nn.Linear(n_features, 16), torch.nn.ReLU())
classify = torch.nn.Linear(16, n_classes)
regress = torch.nn.Linear(16, 1)
params = [*trunk.parameters(), *classify.parameters(), *regress.parameters()]
optimizer = torch.optim.SGD(params, lr=0.1)


def get_batch(size):
    features = torch.randn(size, n_features)
    rows = [i % n_classes for i in range(size)]
    labels = torch.tensor(rows, dtype=torch.float32)
    return features, labels


def train_step(inputs, targets):
    hidden = trunk(inputs)
    loss = F.cross_entropy(classify(hidden), targets.long()) + F.mse_loss(regress(hidden).squeeze(1), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


for epoch in range(3):
    x, y = get_batch(32)
    print(epoch, train_step(x, y))
