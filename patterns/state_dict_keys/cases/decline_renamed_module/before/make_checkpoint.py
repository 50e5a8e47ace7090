import torch
import torch.nn as nn


class OldMVDet(nn.Module):  # the layout the checkpoint was saved with
    def __init__(self):
        super().__init__()
        self.base = nn.Conv2d(3, 8, 3)
        self.world_classifier = nn.Sequential(nn.Conv2d(8, 8, 1), nn.ReLU(), nn.Conv2d(8, 1, 1))


torch.save(OldMVDet().state_dict(), "MultiviewDetector.pth")
