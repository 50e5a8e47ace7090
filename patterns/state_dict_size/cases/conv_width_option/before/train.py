"""Super-resolution demo: the feature width comes from a command-line option."""
import argparse

import torch
import torch.nn as nn


class SRNet(nn.Module):
    def __init__(self, n_feats):
        super().__init__()
        self.head = nn.Conv2d(3, n_feats, 3, padding=1)
        self.body = nn.Conv2d(n_feats, n_feats, 3, padding=1)
        self.tail = nn.Conv2d(n_feats, 3, 3, padding=1)

    def forward(self, x):
        return self.tail(torch.relu(self.body(self.head(x))))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n_feats", type=int, default=32, help="number of feature maps")
    args = parser.parse_args()

    model = SRNet(args.n_feats)
    model.load_state_dict(torch.load("edsr_x2.pt", map_location="cpu"))
    print(model(torch.rand(1, 3, 16, 16)).shape)
