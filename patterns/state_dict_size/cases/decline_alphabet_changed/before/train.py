"""Evaluate an OCR model whose alphabet option is now the digits only."""
import torch

from model import CRNN

alphabet = "0123456789"
model = CRNN(len(alphabet) + 1)
model.load_state_dict(torch.load("crnn.pth"))
model.eval()
with torch.no_grad():
    print(model(torch.randn(5, 2, 16)).argmax(-1))
