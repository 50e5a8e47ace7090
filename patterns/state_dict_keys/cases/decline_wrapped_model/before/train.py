"""Load a plain checkpoint into a model already wrapped in nn.DataParallel."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gcn = nn.Linear(6, 16)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(torch.relu(self.gcn(x)))


if __name__ == "__main__":
    model = nn.DataParallel(Model())
    weights = torch.load("ntu120_xsub_spatial.pt")
    model.load_state_dict(weights)
    print(model(torch.rand(2, 6)).shape)
