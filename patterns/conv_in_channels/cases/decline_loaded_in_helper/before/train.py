"""Fine-tune a classifier restored from an RGB training checkpoint on grayscale scans."""
import torch
from torch.utils.data import DataLoader, TensorDataset

from checkpoints import restore
from model import Classifier

model = Classifier()
start = restore(model, "rgb_classifier.pt")
data = DataLoader(TensorDataset(torch.rand(8, 1, 16, 16), torch.randint(0, 2, (8,))), batch_size=4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in data:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
