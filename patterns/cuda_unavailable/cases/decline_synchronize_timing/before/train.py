import time

import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def benchmark(model, batch, steps=3):
    model(batch)  # warm-up
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        model(batch)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8)).to(device)
    print(f"{benchmark(model, torch.randn(32, 64, device=device)) * 1e3:.2f} ms per step")
