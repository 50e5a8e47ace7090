"""Fine-tune a car classifier on three makes, starting from a 10-class checkpoint."""
import torch

from model import CarNet

classes = ["audi", "bmw", "fiat"]
model = CarNet(num_classes=len(classes))
model.load_state_dict(torch.load("carnet_pretrained.pth"))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    images, labels = torch.randn(4, 3, 32, 32), torch.randint(0, len(classes), (4,))
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
