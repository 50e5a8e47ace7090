"""A two-logit classifier trained towards a teacher's probabilities, handed over by a helper."""

import torch
import torch.nn as nn

n_features = 6
student = nn.Linear(n_features, 2)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)


def get_batch(size):
    features = torch.randn(size, n_features)
    teacher_prob = torch.sigmoid(torch.randn(size))  # the teacher's P(class 1)
    return features, teacher_prob


def train_step(inputs, targets):
    loss = criterion(student(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


x, y = get_batch(8)
train_step(x, y)
