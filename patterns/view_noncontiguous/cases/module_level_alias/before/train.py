# Fits a linear map on flattened spectrogram patches; a quick module-level experiment.
import torch as T
from torch import nn

T.manual_seed(0)
spectra = T.randn(32, 16, 4)  # (examples, frequency, frames)
targets = T.randn(32, 1)

model = nn.Linear(64, 1)
optimizer = T.optim.SGD(model.parameters(), lr=0.01)

for step in range(10):
    patches = spectra.transpose(1, 2).view(spectra.shape[0], 64)
    loss = nn.functional.mse_loss(model(patches), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

print(f"final loss {loss.item():.4f}")
