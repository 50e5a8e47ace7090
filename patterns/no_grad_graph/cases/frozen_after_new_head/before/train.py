"""Fine-tuning a pretrained encoder on a new 3-class task with a fresh head."""
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.features(x))


def finetune(steps=5):
    torch.manual_seed(0)
    model = Encoder()
    model.head = nn.Linear(16, 3)
    for param in model.parameters():
        param.requires_grad = False
    optimizer = torch.optim.Adam(model.head.parameters(), lr=1e-3)
    x, y = torch.randn(32, 12), torch.randint(0, 3, (32,))
    for step in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    print(f"loss {finetune():.3f}")
