"""Toy classifier: get_batch() makes a batch, train_step() and evaluate() take it as parameters."""

import torch
import torch.nn.functional as F

n_features, n_classes = 6, 3
model = torch.nn.Sequential(torch.nn.Linear(n_features, 16), torch.nn.ReLU(), torch.nn.Linear(16, n_classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def get_batch(size):
    features = torch.randn(size, n_features)
    rows = [i % n_classes for i in range(size)]
    labels = torch.tensor(rows, dtype=torch.float32)
    return features, labels


def train_step(inputs, targets):
    loss = F.cross_entropy(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def evaluate(inputs, targets):
    with torch.no_grad():
        logits = model(inputs)
        loss = F.cross_entropy(logits, targets)
        accuracy = (logits.argmax(dim=1) == targets).float().mean()
    return loss.item(), accuracy.item()


for epoch in range(3):
    x, y = get_batch(32)
    print(epoch, train_step(x, y))
x_val, y_val = get_batch(16)
print(evaluate(x_val, y_val))
