import numpy as np
import torch
import torch.nn as nn


def predict(model, batches):
    outputs = []
    for x in batches:
        outputs.append(model(x))
    return np.concatenate(outputs)


def main():
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    batches = [torch.randn(8, 6) for _ in range(3)]
    print(predict(model, batches).shape)


if __name__ == "__main__":
    main()
