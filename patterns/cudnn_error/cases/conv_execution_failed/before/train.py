"""Train SmallVGG on synthetic 64x64 images on the GPU."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from model import SmallVGG

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.backends.cudnn.benchmark = True

torch.manual_seed(0)
data = TensorDataset(torch.randn(256, 3, 64, 64), torch.randint(0, 10, (256,)))
loader = DataLoader(data, batch_size=32, shuffle=True)
model = SmallVGG().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for epoch in range(2):
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.3f}")
