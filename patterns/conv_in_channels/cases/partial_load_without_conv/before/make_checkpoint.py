import torch

from model import Classifier

torch.save(Classifier().state_dict(), "rgb_classifier.pt")
