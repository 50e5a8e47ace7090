"""Depthwise-separable CNN trained with mixed precision on the GPU."""
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def separable(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cin, 3, padding=1, groups=cin), nn.Conv2d(cin, cout, 1), nn.ReLU())


model = nn.Sequential(separable(3, 32), separable(32, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(64, 5)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
torch.manual_seed(0)
images = torch.randn(16, 3, 96, 96, device=device)
labels = torch.randint(0, 5, (16,), device=device)
for step in range(50):
    with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=device.type == "cuda"):
        loss = nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
