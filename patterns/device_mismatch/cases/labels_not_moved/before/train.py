import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build_model():
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 5))


def train_one_epoch(model, loader, optimizer):
    model.train()
    for images, labels in loader:
        images = images.to(device)
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    data = TensorDataset(torch.rand(40, 3, 8, 8), torch.randint(0, 5, (40,)))
    model = build_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        print("epoch", epoch, train_one_epoch(model, DataLoader(data, batch_size=8), optimizer))
