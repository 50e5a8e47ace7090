import argparse

import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--force-cuda", action="store_true", default=True, help="fail without a GPU")
    args = parser.parse_args()
    use_cuda = args.force_cuda or torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")
    model = nn.Linear(4, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4).to(device), torch.randint(0, 2, (8,)).to(device)
    for step in range(3):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    print(loss.item())


if __name__ == "__main__":
    main()
