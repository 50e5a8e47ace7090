"""A stand-in for torchvision in the real-scripts health bench: the datasets are synthetic
tensors of the real shapes (no download), the transforms act on tensors, save_image writes
nothing. Only what the measured scripts import."""
from . import datasets, models, transforms, utils  # noqa: F401

__version__ = "0.0-bench"
