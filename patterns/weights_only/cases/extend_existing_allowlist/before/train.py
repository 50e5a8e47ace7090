import numpy as np
import torch
import torch.nn as nn


def fit(model, steps=5):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(32, 2)
    y = (x[:, :1] > 0).float()
    accuracy = np.float64(0.0)
    for _ in range(steps):
        optimizer.zero_grad()
        logits = model(x)
        nn.functional.binary_cross_entropy_with_logits(logits, y).backward()
        optimizer.step()
        accuracy = np.mean((logits.detach().numpy() > 0) == y.numpy())
    return accuracy


def main():
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    accuracy = fit(model)
    torch.save({"model": model.state_dict(), "accuracy": accuracy}, "model.pt")
    # numpy scalars need allowlisting since torch 2.6
    with torch.serialization.safe_globals([np._core.multiarray.scalar]):
        restored = torch.load("model.pt")
    print(f"accuracy {restored['accuracy']:.2f}")


if __name__ == "__main__":
    main()
