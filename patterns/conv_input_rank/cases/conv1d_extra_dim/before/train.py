"""Speech emotion features [N, 1, frames, bins] given to a Conv1d front end."""
import torch
import torch.nn as nn


class FrontEnd(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, 4, 3, padding=1)

    def forward(self, x4):
        return self.conv(x4).mean(-1)


features = torch.rand(1, 1, 32, 324)
print(FrontEnd()(features).shape)
