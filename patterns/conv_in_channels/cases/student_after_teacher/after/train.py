"""Distillation on grayscale digits: the teacher trains first, then a student copied from an RGB model."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Teacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def train(model, loader):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for images, labels in loader:
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


loader = DataLoader(TensorDataset(torch.rand(8, 1, 16, 16), torch.randint(0, 10, (8,))), batch_size=4)
train(Teacher(), loader)
train(Student(), loader)
