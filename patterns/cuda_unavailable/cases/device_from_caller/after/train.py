import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from utils import to_device

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def train(model, loader, optimizer):
    for batch in loader:
        x, y = to_device(*batch, device=DEVICE)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(32, 4)
    loader = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=8)
    model = to_device(nn.Linear(4, 1), device=DEVICE)
    print(train(model, loader, torch.optim.SGD(model.parameters(), lr=0.05)))
