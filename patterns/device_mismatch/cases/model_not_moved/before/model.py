from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, in_features=20, hidden=32, classes=4):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        return self.fc2(x)
