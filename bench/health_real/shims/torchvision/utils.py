import torch


def make_grid(tensor, *args, **kwargs):
    return tensor.detach()[0] if isinstance(tensor, torch.Tensor) and tensor.dim() == 4 else tensor


def save_image(tensor, fp, *args, **kwargs):
    return None
