"""A CNN run with an MLP's two loops, each flattening the images: the training loop's and the
evaluation helper's (not reached yet when the training loop fails)."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3)
        self.fc = nn.Linear(8 * 26 * 26, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv1(x)).flatten(1))


def accuracy(model, loader):
    correct = 0
    for images, labels in loader:
        images = images.view(-1, 28 * 28)
        correct += (model(images).argmax(1) == labels).sum().item()
    return correct / len(loader.dataset)


loader = DataLoader(TensorDataset(torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,))), batch_size=16)
model = CNN()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for images, labels in loader:
    images = images.view(-1, 28 * 28)
    loss = nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(accuracy(model, loader))
