import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k."""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].view(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def run_epoch(model, loader, optimizer, loss_fn):
    model.train()
    for step, (images, labels) in enumerate(loader):
        output = model(images)
        loss = loss_fn(output, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        top1, top5 = accuracy(output, labels, topk=(1, 5))
        print(f"step {step}: loss {loss.item():.3f} top1 {top1.item():.1f} top5 {top5.item():.1f}")


def main():
    torch.manual_seed(0)
    images = torch.randn(96, 3, 8, 8)
    labels = torch.randint(0, 10, (96,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(2):
        run_epoch(model, loader, optimizer, nn.CrossEntropyLoss())


if __name__ == "__main__":
    main()
