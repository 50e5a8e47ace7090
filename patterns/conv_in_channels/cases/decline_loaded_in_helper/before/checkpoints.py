import torch


def restore(model, path):
    """Load the weights of a training checkpoint into ``model``; returns its epoch."""
    checkpoint = torch.load(path)
    model.load_state_dict(checkpoint["model"])
    return checkpoint["epoch"]
