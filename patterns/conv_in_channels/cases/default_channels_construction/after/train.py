import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from model import SmallCNN

digits = TensorDataset(torch.rand(12, 1, 28, 28), torch.randint(0, 10, (12,)))
loader = DataLoader(digits, batch_size=4, shuffle=True)
net = SmallCNN(num_classes=10, channels=1)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for epoch in range(2):
    for images, labels in loader:
        loss = nn.functional.cross_entropy(net(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
print("done")
