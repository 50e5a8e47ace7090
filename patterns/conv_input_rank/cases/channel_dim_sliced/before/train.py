"""Spiking-network style MNIST demo: the images are stacked as [N, 28, 28] arrays."""
import torch
import torch.nn as nn

images = torch.rand(100, 28, 28)
labels = torch.randint(0, 10, (100,))
conv = nn.Conv2d(1, 16, 7)
readout = nn.Linear(16 * 22 * 22, 10)
optimizer = torch.optim.Adam(list(conv.parameters()) + list(readout.parameters()))


def step(batch, target):
    spikes = torch.sigmoid(conv(batch))
    loss = nn.functional.cross_entropy(readout(spikes.flatten(1)), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


for i in range(0, 100, 25):
    print(step(images[i:i + 25], labels[i:i + 25]))
