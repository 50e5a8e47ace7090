"""Multi-task autoencoder: a classifier head and a reconstruction head share one encoder."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 8))

    def forward(self, x):
        return self.net(x)


encoder = Encoder()
classifier = nn.Linear(8, 3)
decoder = nn.Linear(8, 20)
params = [*encoder.parameters(), *classifier.parameters(), *decoder.parameters()]
optimizer = torch.optim.Adam(params, lr=1e-3)

x = torch.randn(64, 20)
y = torch.randint(0, 3, (64,))
for step in range(3):
    optimizer.zero_grad()
    features = encoder(x)
    loss_cls = F.cross_entropy(classifier(features), y)
    loss_rec = F.mse_loss(decoder(features), x)
    loss_cls.backward()
    loss_rec.backward()
    optimizer.step()
    print(f"step {step}: cls {loss_cls.item():.3f} rec {loss_rec.item():.3f}")
