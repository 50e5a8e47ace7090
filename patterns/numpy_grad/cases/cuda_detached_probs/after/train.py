import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from models import Classifier


def evaluate(model, loader, device):
    model.eval()
    all_probs, all_labels = [], []
    with torch.no_grad():
        for x, y in loader:
            x = x.to(device)
            probs = torch.softmax(model(x), dim=1)
            all_probs.append(probs.detach().cpu().numpy())
            all_labels.append(y.numpy())
    probs, labels = np.concatenate(all_probs), np.concatenate(all_labels)
    return (probs.argmax(axis=1) == labels).mean()


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    x, y = torch.randn(128, 12), torch.randint(0, 4, (128,))
    train_loader = DataLoader(TensorDataset(x[:96], y[:96]), batch_size=16, shuffle=True)
    val_loader = DataLoader(TensorDataset(x[96:], y[96:]), batch_size=16)
    model = Classifier().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        model.train()
        for xb, yb in train_loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
        print(f"epoch {epoch}: val acc {evaluate(model, val_loader, device):.3f}")


if __name__ == "__main__":
    main()
