import torch

from models import MaskedMLP


def main():
    torch.manual_seed(0)
    model = MaskedMLP().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 8).cuda()
    y = x[:, 1:2] * 2
    for step in range(5):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
