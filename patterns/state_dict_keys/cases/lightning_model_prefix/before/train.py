"""Use the network of a Lightning checkpoint without Lightning, for inference."""
import torch
import torch.nn as nn


def make_net():
    return nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))


if __name__ == "__main__":
    ckpt = torch.load("epoch=9.ckpt")
    net = make_net()
    net.load_state_dict(ckpt["state_dict"])
    net.eval()
    print(net(torch.rand(4, 1, 16, 16)).softmax(-1))
