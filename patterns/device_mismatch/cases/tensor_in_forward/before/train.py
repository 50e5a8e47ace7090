import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


class RecurrentClassifier(nn.Module):
    """A leaky integrator over (batch, time, features) sequences."""

    def __init__(self, features=8, hidden=16, classes=3):
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        h = torch.zeros(x.size(0), 16)
        for t in range(x.size(1)):
            h = torch.tanh(self.inp(x[:, t]) + 0.5 * h)
        return self.head(h)


def main():
    torch.manual_seed(0)
    sequences = torch.randn(48, 5, 8)
    classes = torch.randint(0, 3, (48,))
    loader = DataLoader(TensorDataset(sequences, classes), batch_size=12, shuffle=True)
    model = RecurrentClassifier().to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(2):
        for seq, target in loader:
            seq, target = seq.to(DEVICE), target.to(DEVICE)
            loss = nn.functional.cross_entropy(model(seq), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: {loss.item():.3f}")


if __name__ == "__main__":
    main()
