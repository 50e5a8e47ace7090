import torch


def load_best(path):
    return torch.load(path, map_location="cpu")
