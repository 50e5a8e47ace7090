import sys

sys.path.insert(0, "site-packages")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from seqkit import flatten_time  # noqa: E402


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 6)  # time-major
        self.head = nn.Linear(6 * 10, 2)

    def forward(self, x):
        out, _ = self.rnn(x.transpose(0, 1))
        return self.head(flatten_time(out.transpose(0, 1)))


def main():
    torch.manual_seed(0)
    model = Tagger()
    optimizer = torch.optim.Adam(model.parameters())
    x, y = torch.randn(8, 10, 4), torch.randint(0, 2, (8,))
    for _ in range(3):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
