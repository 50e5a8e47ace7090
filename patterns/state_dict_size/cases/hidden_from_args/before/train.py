"""Evaluate a distilled re-identification student with a classifier on its features."""
import torch
import torch.nn as nn

CONFIG = {"feat_dim": 512, "ids": 625}


def build(config):
    return nn.Sequential(
        nn.Linear(128, config["feat_dim"]),
        nn.ReLU(),
        nn.Linear(config["feat_dim"], config["ids"]),
    )


def evaluate(path):
    net = build(CONFIG)
    state = torch.load(path)
    net.load_state_dict(state["state_dict"])
    net.eval()
    return net(torch.randn(2, 128)).argmax(1)


if __name__ == "__main__":
    print(evaluate("student.pth.tar"))
