"""Next-character language model; the targets were meant to be the inputs shifted by one."""
import torch
import torch.nn as nn

VOCAB, SEQ = 27, 12


class CharModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 24)
        self.rnn = nn.GRU(24, 48, batch_first=True)
        self.out = nn.Linear(48, VOCAB)

    def forward(self, x):
        h, _ = self.rnn(self.embed(x))
        return self.out(h)


def train(batches):
    model = CharModel()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for tokens in batches:
        logits = model(tokens[:, :-1])
        loss = criterion(logits.reshape(-1, VOCAB), tokens.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    train([torch.randint(0, VOCAB, (4, SEQ)) for _ in range(5)])
