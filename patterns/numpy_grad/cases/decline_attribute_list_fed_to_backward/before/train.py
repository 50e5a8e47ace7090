import numpy as np
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.step_losses = []

    def step(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y)
        self.step_losses.append(loss)

    def update(self):
        # one step on the mean of the collected losses: the list must keep its graph
        self.optimizer.zero_grad()
        torch.stack(self.step_losses).mean().backward()
        self.optimizer.step()
        print("mean loss", np.mean(self.step_losses))
        self.step_losses = []


trainer = Trainer(nn.Linear(4, 1))
for epoch in range(3):
    for batch in range(4):
        trainer.step(torch.randn(8, 4), torch.randn(8, 1))
    trainer.update()
