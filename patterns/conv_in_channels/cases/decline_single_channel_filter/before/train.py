"""An edge-aware loss: a fixed Sobel filter on the prediction and the target."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class SobelEdges(nn.Module):
    def __init__(self):
        super().__init__()
        self.edge = nn.Conv2d(1, 1, 3, padding=1, bias=False)
        kernel = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])
        self.edge.weight = nn.Parameter(kernel.view(1, 1, 3, 3), requires_grad=False)

    def forward(self, x):
        return self.edge(x).abs()


denoiser = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1))
edges = SobelEdges()
pairs = TensorDataset(torch.rand(8, 3, 32, 32), torch.rand(8, 3, 32, 32))
loader = DataLoader(pairs, batch_size=4, shuffle=True)
optimizer = torch.optim.Adam(denoiser.parameters(), lr=1e-3)
for noisy, clean in loader:
    restored = denoiser(noisy)
    loss = nn.functional.l1_loss(restored, clean) + nn.functional.l1_loss(edges(restored), edges(clean))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
