import torch
from torch import nn


class MaskNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))

    def forward(self, x):
        return self.body(x)


def load_batch():
    images = torch.rand(2, 3, 32, 32)
    # the masks were read as RGB images: three identical channels instead of one
    masks = (images[:, :1] > 0.5).float().expand(-1, 3, -1, -1)
    return images, masks


torch.manual_seed(0)
model = MaskNet()
loss_fn = nn.BCEWithLogitsLoss()
optimizer = torch.optim.Adam(model.parameters())
for step in range(3):
    images, masks = load_batch()
    pred_masks = model(images)
    loss = loss_fn(pred_masks, masks)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
