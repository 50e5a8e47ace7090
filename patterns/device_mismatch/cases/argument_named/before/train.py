import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def fit(model, train_loader, optimizer, epochs, dev):
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        running = 0.0
        for batch in train_loader:
            inputs, targets = batch
            optimizer.zero_grad()
            logits = model(inputs)
            loss = criterion(logits, targets)
            loss.backward()
            optimizer.step()
            running += loss.item()
        print(f"epoch {epoch + 1}: {running / len(train_loader):.4f}")


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataset = TensorDataset(torch.randn(80, 6), torch.randint(0, 2, (80,)))
    model = nn.Sequential(nn.Linear(6, 24), nn.GELU(), nn.Linear(24, 2)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    fit(model, DataLoader(dataset, batch_size=10, shuffle=True), optimizer, epochs=2, dev=device)


if __name__ == "__main__":
    main()
