"""Fine-tune an encoder pretrained on RGB images with a grayscale dataset."""
import torch
from torch.utils.data import DataLoader, TensorDataset

from model import Encoder

model = Encoder()
model.load_state_dict(torch.load("encoder_rgb.pt"))
data = DataLoader(TensorDataset(torch.rand(8, 1, 16, 16), torch.randint(0, 2, (8,))), batch_size=4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in data:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
