from argparse import ArgumentParser

import numpy as np
import torch
import torch.nn as nn

from checkpoints import load_checkpoint, save_checkpoint


def main():
    parser = ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    labels = np.array([0, 0, 0, 1, 2, 2])
    class_weights = len(labels) / (3 * np.bincount(labels))  # a float64 array
    model = nn.Linear(5, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss(weight=torch.tensor(class_weights, dtype=torch.float32))
    for step in range(args.steps):
        x, y = torch.randn(6, 5), torch.from_numpy(labels)
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    save_checkpoint("last.pt", model, optimizer, {"class_weights": class_weights, "args": args})
    state = load_checkpoint("last.pt", model, optimizer)
    print("restored; class weights", state["class_weights"])


if __name__ == "__main__":
    main()
