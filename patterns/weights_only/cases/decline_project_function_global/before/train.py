import torch
import torch.nn as nn


def swish(x):
    return x * torch.sigmoid(x)


class Net(nn.Module):
    def __init__(self, activation):
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.activation = activation  # a plain function, pickled by reference

    def forward(self, x):
        return self.fc(self.activation(x))


def main():
    torch.manual_seed(0)
    model = Net(swish)
    model(torch.randn(2, 4)).sum().backward()
    torch.save(model, "model.pt")
    model = torch.load("model.pt")
    print("reloaded", model)


if __name__ == "__main__":
    main()
