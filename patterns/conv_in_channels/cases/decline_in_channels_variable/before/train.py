"""A latent decoder built for 4 latent channels, given a 16-channel latent."""
import torch
import torch.nn as nn


class Decoder(nn.Module):
    def __init__(self, latent_channels=4):
        super().__init__()
        self.conv_in = nn.Conv2d(latent_channels, 64, 3, padding=1)
        self.conv_out = nn.Conv2d(64, 3, 3, padding=1)

    def forward(self, z):
        return self.conv_out(torch.relu(self.conv_in(z)))


latent = torch.randn(1, 16, 16, 16)
print(Decoder()(latent).shape)
