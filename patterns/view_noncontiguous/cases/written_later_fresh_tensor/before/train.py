import torch
import torch.nn as nn


def noisy_inputs(features, noise):
    """The (batch, features) inputs of a feature-major (features, batch) table, scaled, with noise."""
    scaled = features * 2.0
    flat = scaled.t().view(-1)
    flat += noise * torch.randn_like(flat)
    return flat.view(features.shape[1], features.shape[0])


def main():
    torch.manual_seed(0)
    model = nn.Linear(5, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    features = torch.randn(5, 16)  # stored feature-major
    targets = features.sum(dim=0, keepdim=True).t()
    for step in range(5):
        inputs = noisy_inputs(features, 0.01)
        loss = nn.functional.mse_loss(model(inputs), targets * 2.0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
