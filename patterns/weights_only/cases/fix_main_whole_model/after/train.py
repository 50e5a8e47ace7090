import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.head(self.body(x))


def main():
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    torch.save(model, "model.pt")  # the whole model, pickled
    with torch.serialization.safe_globals(
        [Net, nn.ReLU, nn.Sequential, nn.Dropout, nn.Linear]
    ):
        model = torch.load("model.pt")
    model.eval()
    print("reloaded", type(model).__name__)


if __name__ == "__main__":
    main()
