"""A CNN dropped into an MLP's MNIST training loop, which still flattens the images."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 12 * 12, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        return self.fc(x.flatten(1))


train_set = TensorDataset(torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,)))
loader = DataLoader(train_set, batch_size=32, shuffle=True)
model = CNN()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(2):
    for images, labels in loader:
        images = images.view(-1, 28 * 28)
        outputs = model(images)
        loss = nn.functional.cross_entropy(outputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
