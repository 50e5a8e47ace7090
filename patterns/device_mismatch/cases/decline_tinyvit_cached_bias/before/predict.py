"""Embed image patches with the TinyViT attention block on the GPU, as SamPredictor does."""
import torch

from tiny_vit_sam import Attention


def build_encoder():
    # the model builders return the network in eval mode, ready for inference
    encoder = Attention(dim=32, key_dim=8, num_heads=2, resolution=(4, 4))
    encoder.eval()
    return encoder


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    encoder = build_encoder()
    encoder.to(device=device)
    patches = torch.randn(2, 16, 32, device=device)
    with torch.no_grad():
        features = encoder(patches)
    print(features.shape)


if __name__ == "__main__":
    main()
