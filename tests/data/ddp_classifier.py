"""A tiny DDP classifier for the launcher tests: run with `torchrun --nproc_per_node 2`, gloo
on the CPU, a DistributedSampler and DDP(model); few samples and a tiny model, since every
rank imports torch and joins the rendezvous on a loaded machine."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    print("rank %s pid %d" % (os.environ.get("RANK"), os.getpid()), flush=True)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    features = torch.randn(16, 12)
    labels = torch.randint(0, 3, (16,))
    dataset = TensorDataset(features, labels)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
    if dist.get_rank() == 0:
        print("trained, last loss %.4f" % loss.item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
