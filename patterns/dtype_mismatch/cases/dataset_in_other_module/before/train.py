import torch
from torch.utils.data import DataLoader

from data import SensorDataset, load_readings
from models import SensorNet


def train(model, loader, optimizer, criterion):
    model.train()
    for step, (inputs, labels) in enumerate(loader):
        optimizer.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")


readings, labels = load_readings(256)
loader = DataLoader(SensorDataset(readings, labels), batch_size=32, shuffle=True)
model = SensorNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train(model, loader, optimizer, torch.nn.CrossEntropyLoss())
