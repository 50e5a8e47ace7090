import torch

from train import GPTModel

torch.save(torch.compile(GPTModel()).state_dict(), "model.pth")
