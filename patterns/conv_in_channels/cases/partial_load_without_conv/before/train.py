"""Reuse an RGB classifier on grayscale scans: every weight but the first conv's is loaded."""
import torch
from torch.utils.data import DataLoader, TensorDataset

from model import Classifier

model = Classifier()
state = torch.load("rgb_classifier.pt")
state = {k: v for k, v in state.items() if not k.startswith("conv1.")}
model.load_state_dict(state, strict=False)
data = DataLoader(TensorDataset(torch.rand(8, 1, 16, 16), torch.randint(0, 2, (8,))), batch_size=4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in data:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
