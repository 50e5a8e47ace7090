import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 512), nn.ReLU())
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        h = self.encoder(x)
        return self.fc(h)


torch.manual_seed(0)
model = Classifier()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print("loss", loss.item())
