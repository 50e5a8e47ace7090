"""A tiny classifier trained with Hugging Face accelerate, for the launcher tests: run with
`accelerate launch --multi_gpu --num_processes 2` (two gloo ranks on the CPU)."""

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(16, 12), torch.randint(0, 3, (16,)))
    loader = DataLoader(dataset, batch_size=4, shuffle=True)
    model = nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
    accelerator.print("trained on %d processes, last loss %.4f" % (accelerator.num_processes, loss.item()))


if __name__ == "__main__":
    main()
