"""Size a large model without allocating it, then report its first layer's weights."""
import torch
import torch.nn as nn


def build(width):
    return nn.Sequential(nn.Linear(128, width), nn.ReLU(), nn.Linear(width, 10))


def main():
    with torch.device("meta"):
        model = build(4096)
    count = sum(p.numel() for p in model.parameters())
    print(f"{count / 1e6:.1f}M parameters")
    first = model[0].weight.detach()
    print("first row:", first[0].numpy()[:4])


if __name__ == "__main__":
    main()
