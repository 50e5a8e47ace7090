import torch
from torch import nn


def load_pretrained(model, path, device):
    state = torch.load(path)
    model.load_state_dict(state)
    return model.to(device)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = load_pretrained(nn.Linear(4, 2), "weights.pt", device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 4, device=device)
    y = torch.randint(0, 2, (8,), device=device)
    for step in range(3):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    print("loss", loss.item())


if __name__ == "__main__":
    main()
