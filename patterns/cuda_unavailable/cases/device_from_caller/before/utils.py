"""Small helpers shared by the training scripts."""


def to_device(*objects, device):
    """Move tensors and modules to ``device``: one object comes back as it is, several as a list."""
    moved = [obj.to(device) for obj in objects]
    return moved[0] if len(moved) == 1 else moved
