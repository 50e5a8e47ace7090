"""Writes pretrained/encoder.pt as NumPy 1.x wrote it: its validation accuracy, a NumPy scalar,
is pickled under the old module path numpy.core.multiarray (NumPy 2 renamed it numpy._core)."""

import os
import zipfile

import numpy
import torch

from model import Encoder

os.makedirs("pretrained", exist_ok=True)
torch.manual_seed(0)
torch.save({"encoder": Encoder().state_dict(), "val_acc": numpy.float64(0.87)}, "pretrained/tmp.pt")
with zipfile.ZipFile("pretrained/tmp.pt") as source, zipfile.ZipFile("pretrained/encoder.pt", "w") as target:
    for item in source.infolist():
        data = source.read(item.filename)
        if item.filename.endswith("data.pkl"):
            data = data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
        target.writestr(item, data)
os.remove("pretrained/tmp.pt")
