"""Saving and restoring training state."""

import torch


def save_checkpoint(path, model, optimizer, extra):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), **extra}, path)


def load_checkpoint(path, model, optimizer=None):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    return state
