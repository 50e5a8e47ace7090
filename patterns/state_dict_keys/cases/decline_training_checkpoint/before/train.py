"""Forecast from a trained checkpoint: the whole training checkpoint is given to load_state_dict."""
import torch
import torch.nn as nn


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.GRU(4, 16, batch_first=True)
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        h, _ = self.encoder(x)
        return self.out(h[:, -1])


if __name__ == "__main__":
    model = Forecaster()
    model.load_state_dict(torch.load("last.ckpt"))
    print(model(torch.rand(2, 8, 4)))
