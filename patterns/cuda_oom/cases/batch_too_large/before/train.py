"""Texture classifier on 96x96 crops generated on the fly, in large hand-made batches."""
import torch
import torch.nn as nn

BATCH = 1024
STEPS = 200


class TextureNet(nn.Module):
    def __init__(self, classes=8):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(128, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def make_batch(size, device):
    labels = torch.randint(0, 8, (size,), device=device)
    crops = torch.rand(size, 3, 96, 96, device=device) * (labels.view(-1, 1, 1, 1) + 1) / 8
    return crops, labels


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = TextureNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(STEPS):
        crops, labels = make_batch(BATCH, device)
        loss = nn.functional.cross_entropy(model(crops), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
