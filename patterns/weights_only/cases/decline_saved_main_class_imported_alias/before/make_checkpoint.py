# Stands in for the notebook that trained the model: the class is defined in the notebook itself
# (__main__), and the whole model is saved.
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width=8, classes=3):
        super().__init__()
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        return self.fc(x)


torch.save(Net(), "net.pt")
