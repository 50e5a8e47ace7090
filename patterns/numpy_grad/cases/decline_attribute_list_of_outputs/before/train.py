import numpy as np
import torch
import torch.nn as nn


class Evaluator:
    def __init__(self, model):
        self.model = model
        self.outputs = []

    def collect(self, x):
        out = self.model(x)
        self.outputs.append(out)

    def scores(self):
        return np.concatenate(self.outputs)


torch.manual_seed(0)
evaluator = Evaluator(nn.Linear(6, 3))
for batch in range(3):
    evaluator.collect(torch.randn(8, 6))
print(evaluator.scores().shape)
