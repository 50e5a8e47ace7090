import numpy as np
import torch
import torch.nn as nn


def evaluate(model, batches):
    losses = []
    for x, y in batches:
        losses.append(nn.functional.cross_entropy(model(x), y).item())
    return np.mean(losses)


def main():
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    batches = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(4)]
    print(f"validation loss: {evaluate(model, batches):.4f}")


if __name__ == "__main__":
    main()
