"""Speech-command classifier on log-mel spectrograms (synthetic), logging the epoch's mean loss."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class KeywordNet(nn.Module):
    def __init__(self, classes=35):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))


def train_epoch(model, loader, optimizer, device):
    epoch_loss = 0.0
    for spectrograms, labels in loader:
        spectrograms, labels = spectrograms.to(device), labels.to(device)
        loss = nn.functional.cross_entropy(model(spectrograms), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_loss += loss
    return epoch_loss / len(loader)


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(2048, 1, 40, 101), torch.randint(0, 35, (2048,)))
    model = KeywordNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(30):
        mean_loss = train_epoch(model, DataLoader(data, batch_size=128, shuffle=True), optimizer, device)
        print(f"epoch {epoch}: loss {mean_loss.item():.3f}")
