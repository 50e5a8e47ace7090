"""Plain SGD for hand-made parameters."""


def sgd(params, lr):
    for p in params:
        p -= lr * p.grad
        p.grad = None
