import torch
from torch.utils.data import Dataset

_SHAPES = {"MNIST": (1, 28, 28), "FashionMNIST": (1, 28, 28), "KMNIST": (1, 28, 28), "EMNIST": (1, 28, 28),
           "CIFAR10": (3, 32, 32), "CIFAR100": (3, 32, 32), "SVHN": (3, 32, 32), "STL10": (3, 96, 96),
           "ImageFolder": (3, 64, 64), "CelebA": (3, 64, 64), "LSUN": (3, 64, 64)}
_CLASSES = {"CIFAR100": 100, "EMNIST": 26}


class _Synthetic(Dataset):
    """Deterministic random images (each index its own sample) and integer labels."""

    shape = (1, 28, 28)
    classes_count = 10

    def __init__(self, root=None, train=True, download=False, transform=None, target_transform=None,
                 split=None, **kwargs):
        self.root, self.transform, self.target_transform = root, transform, target_transform
        self.train = train if split is None else split == "train"
        self.size = 256 if self.train else 64
        self.offset = 0 if self.train else 100000
        self.targets = [i % self.classes_count for i in range(self.size)]
        self.classes = [str(c) for c in range(self.classes_count)]
        self.data = torch.zeros((self.size, *self.shape[1:]), dtype=torch.uint8)

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(self.offset + int(index))
        image = torch.rand(self.shape, generator=generator)
        target = self.targets[index]
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target


def _dataset(name):
    return type(name, (_Synthetic,), {"shape": _SHAPES[name], "classes_count": _CLASSES.get(name, 10)})


for _name in _SHAPES:
    globals()[_name] = _dataset(_name)
