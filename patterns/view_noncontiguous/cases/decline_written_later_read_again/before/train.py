import torch
import torch.nn as nn


def masked_scores(z):
    """Cosine similarities of the batch with each sample's self-similarity zeroed."""
    z = nn.functional.normalize(z, dim=1)
    scores = z @ z.t()
    flat = scores.t().view(-1)
    flat[:: scores.size(0) + 1] = 0.0
    return scores


def main():
    torch.manual_seed(0)
    encoder = nn.Linear(8, 4)
    optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1)
    data = torch.randn(16, 8)
    for step in range(3):
        scores = masked_scores(encoder(data))
        loss = scores.pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("done", loss.item())


if __name__ == "__main__":
    main()
