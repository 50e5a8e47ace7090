import torch

from model import Classifier

torch.save({"epoch": 30, "model": Classifier().state_dict()}, "rgb_classifier.pt")
