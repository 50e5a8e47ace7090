import functools
import math

import torch
import torch.nn as nn


def cosine(step, total):
    return 0.5 * (1 + math.cos(math.pi * step / total))


def main():
    model = nn.Linear(3, 3)
    schedule = functools.partial(cosine, total=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    for step in range(3):
        optimizer.zero_grad()
        model(torch.randn(4, 3)).sum().backward()
        optimizer.step()
        scheduler.step()
    torch.save({"model": model.state_dict(), "schedule": schedule, "step": 3}, "resume.pt")
    state = torch.load("resume.pt")
    print("resuming at step", state["step"])


if __name__ == "__main__":
    main()
