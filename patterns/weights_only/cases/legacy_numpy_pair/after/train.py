import argparse

import numpy
import torch as th

from model import Encoder


def load_pretrained(path):
    with th.serialization.safe_globals(
        [(numpy._core.multiarray.scalar, "numpy.core.multiarray.scalar"), numpy.dtype, numpy.dtypes.Float64DType]
    ):
        state = th.load(path)
    encoder = Encoder()
    encoder.load_state_dict(state["encoder"])
    print(f"pretrained encoder (validation accuracy {state['val_acc']:.2f})")
    return encoder


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pretrained", default="pretrained/encoder.pt")
    args = parser.parse_args()
    encoder = load_pretrained(args.pretrained)
    head = th.nn.Linear(8, 2)
    optimizer = th.optim.Adam(list(encoder.parameters()) + list(head.parameters()), lr=1e-3)
    x, y = th.randn(16, 8), th.randint(0, 2, (16,))
    for step in range(3):
        loss = th.nn.functional.cross_entropy(head(encoder(x)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print("fine-tuned:", numpy.round(loss.item(), 3))


if __name__ == "__main__":
    main()
