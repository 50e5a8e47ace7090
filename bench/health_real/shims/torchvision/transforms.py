import torch
import torch.nn.functional as F


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class _Identity:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, x):
        return x


class Resize:
    def __init__(self, size, *args, **kwargs):
        self.size = (size, size) if isinstance(size, int) else tuple(size)

    def __call__(self, x):
        if tuple(x.shape[-2:]) == self.size:
            return x
        return F.interpolate(x.unsqueeze(0), size=self.size, mode="bilinear", align_corners=False)[0]


class CenterCrop(Resize):
    pass


class RandomResizedCrop(Resize):
    pass


class RandomCrop(Resize):
    def __init__(self, size, padding=None, *args, **kwargs):
        super().__init__(size)


class Normalize:
    def __init__(self, mean, std, inplace=False):
        self.mean, self.std = torch.tensor(mean).view(-1, 1, 1), torch.tensor(std).view(-1, 1, 1)

    def __call__(self, x):
        return (x - self.mean) / self.std


class Grayscale:
    def __init__(self, num_output_channels=1):
        self.channels = num_output_channels

    def __call__(self, x):
        return x.mean(0, keepdim=True).expand(self.channels, *x.shape[1:]).clone()


class Lambda:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, x):
        return self.fn(x)


ToTensor = RandomHorizontalFlip = RandomVerticalFlip = RandomRotation = ColorJitter = ToPILImage = _Identity
RandomAffine = Pad = RandomApply = RandomGrayscale = GaussianBlur = _Identity
