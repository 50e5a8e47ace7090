import torch
import torch.nn as nn


class Denoiser(nn.Module):
    """Predicts a clean two-channel image; the head works on channels-last features."""

    def __init__(self):
        super().__init__()
        self.body = nn.Conv2d(2, 4, kernel_size=3, padding=1)
        self.head = nn.Linear(4, 2)

    def forward(self, noisy):
        features = self.body(noisy).permute(0, 2, 3, 1)  # (batch, H, W, 4) for the Linear head
        return self.head(features).permute(0, 3, 1, 2)  # back to (batch, 2, H, W)


def train(steps=5):
    torch.manual_seed(0)
    model = Denoiser()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(steps):
        clean = torch.rand(4, 2, 8, 8)
        noisy = clean + 0.1 * torch.randn_like(clean)
        pixels = clean.flatten(1)  # the loss compares flattened images
        out = model(noisy)
        loss = nn.functional.l1_loss(out.view_as(pixels), pixels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: {loss.item():.4f}")


if __name__ == "__main__":
    train()
