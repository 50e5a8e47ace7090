"""LSTM-VAE decoder: the latent becomes the decoder's state without a layer dimension."""
import torch
import torch.nn as nn

decoder = nn.LSTM(8, 16, batch_first=True)
to_hidden = nn.Linear(4, 16)
z = torch.randn(3, 4)
h_ = to_hidden(z)
hidden = (h_.contiguous(), h_.contiguous())
out, _ = decoder(torch.zeros(3, 10, 8), hidden)
print(out.shape)
