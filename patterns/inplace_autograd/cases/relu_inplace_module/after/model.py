from torch import nn


def build_scorer(in_dim, hidden=32):
    return nn.Sequential(
        nn.Linear(in_dim, hidden),
        nn.Sigmoid(),
        nn.ReLU(),
        nn.Linear(hidden, 1),
    )
