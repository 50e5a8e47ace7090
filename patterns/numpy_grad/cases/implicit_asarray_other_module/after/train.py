import numpy as onp
import torch

from models import Encoder


def centroid_distances(encoder, samples, labels):
    """Distance of every embedding to its class centroid (a quick clustering check)."""
    embeddings = encoder(samples)
    vectors = onp.asarray(embeddings.detach().cpu().numpy())
    centroids = {c: vectors[labels == c].mean(axis=0) for c in onp.unique(labels)}
    return onp.array([onp.linalg.norm(v - centroids[c]) for v, c in zip(vectors, labels)])


def main():
    torch.manual_seed(0)
    encoder = Encoder()
    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
    samples = torch.randn(32, 10)
    labels = onp.arange(32) % 4
    for step in range(5):
        loss = encoder(samples).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: spread {centroid_distances(encoder, samples, labels).mean():.3f}")


if __name__ == "__main__":
    main()
