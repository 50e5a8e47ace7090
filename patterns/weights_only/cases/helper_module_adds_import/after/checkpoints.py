"""Saving and restoring training state."""

import argparse
import numpy as np
import torch


def save_checkpoint(path, model, optimizer, extra):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), **extra}, path)


def load_checkpoint(path, model, optimizer=None):
    with torch.serialization.safe_globals(
        [argparse.Namespace, np._core.multiarray._reconstruct, np.dtype, np.ndarray, np.dtypes.Float64DType]
    ):
        state = torch.load(path)
    model.load_state_dict(state["model"])
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    return state
