import torch

from model import Encoder

torch.save(Encoder().state_dict(), "encoder_rgb.pt")
