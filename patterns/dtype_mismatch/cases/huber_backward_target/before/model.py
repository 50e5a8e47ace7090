from torch import nn


class RentModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fit = nn.Linear(1, 1)

    def forward(self, area):
        return self.fit(area)
