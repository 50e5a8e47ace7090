import torch
from torch import nn


class TinySegmenter(nn.Module):
    """One output channel: the logit of 'foreground' per pixel."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 1, 1)

    def forward(self, images):
        return self.conv2(torch.relu(self.conv1(images)))


torch.manual_seed(0)
images = torch.rand(4, 3, 16, 16)
masks = (images.mean(dim=1) > 0.5).float()  # (N, H, W)
model = TinySegmenter()
loss_fn = nn.BCEWithLogitsLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(5):
    optimizer.zero_grad()
    loss = loss_fn(model(images), masks)
    loss.backward()
    optimizer.step()
print(loss.item())
