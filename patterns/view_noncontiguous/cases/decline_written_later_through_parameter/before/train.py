import torch
import torch.nn as nn


def augment(batch, noise):
    """Adds noise to every feature of a (features, batch) tensor, returned as (batch, features)."""
    flat = batch.t().view(-1)
    flat += noise * torch.randn_like(flat)
    return flat.view(batch.shape[1], batch.shape[0])


def main():
    torch.manual_seed(0)
    model = nn.Linear(5, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    features = torch.randn(5, 16)  # stored feature-major
    targets = features.sum(dim=0, keepdim=True).t()
    for step in range(5):
        inputs = augment(features, 0.01)
        loss = nn.functional.mse_loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
