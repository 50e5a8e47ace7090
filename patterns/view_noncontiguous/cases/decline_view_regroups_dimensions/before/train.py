import torch
import torch.nn as nn


class PixelAttention(nn.Module):
    """Self-attention over the pixels of a feature map (SAGAN style)."""

    def __init__(self, channels):
        super().__init__()
        self.query = nn.Conv2d(channels, channels // 2, 1)
        self.key = nn.Conv2d(channels, channels // 2, 1)
        self.value = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q = self.query(x)
        q = q.permute(0, 2, 3, 1).view(b, -1, h * w)  # (b, pixels, c // 2) was meant
        k = self.key(x).view(b, -1, h * w)
        attn = torch.softmax(q.transpose(1, 2) @ k, dim=-1)
        v = self.value(x).view(b, c, h * w)
        return x + (v @ attn.transpose(1, 2)).view(b, c, h, w)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), PixelAttention(4), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        images, labels = torch.randn(8, 3, 4, 4), torch.randint(0, 2, (8,))
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("loss", loss.item())


if __name__ == "__main__":
    main()
