import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from model import Net

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def main():
    torch.manual_seed(0)
    features = torch.randn(128, 20)
    labels = torch.randint(0, 4, (128,))
    loader = DataLoader(TensorDataset(features, labels), batch_size=32, shuffle=True)
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
