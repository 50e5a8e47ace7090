import torch
import torch.nn as nn


class Trainer:
    """Not an nn.Module: a plain object that holds the model and its settings."""

    def __init__(self, model, lr):
        self.model = model
        self.lr = lr

    def step(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        with torch.no_grad():
            for p in self.model.parameters():
                p -= self.lr * p.grad
                p.grad = None
        return loss.item()


def main():
    torch.manual_seed(0)
    trainer = Trainer(nn.Linear(4, 1), lr=0.1)
    for _ in range(3):
        trainer.step(torch.randn(8, 4), torch.randn(8, 1))
    torch.save(trainer, "trainer.pt")
    trainer = torch.load("trainer.pt")
    print("resumed", trainer.lr)


if __name__ == "__main__":
    main()
