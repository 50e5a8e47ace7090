import argparse

import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=8)
    args = parser.parse_args()
    model = nn.Linear(args.width, 2)
    torch.save({"args": args, "weight": model.weight.detach(), "bias": model.bias.detach()}, "snapshot.pt")

    for name, value in torch.load("snapshot.pt").items():
        print(name, getattr(value, "shape", value))


if __name__ == "__main__":
    main()
