"""Character-level LSTM language model on a synthetic stream; the (h, c) state runs across steps."""
import torch
import torch.nn as nn

torch.manual_seed(0)
VOCAB, SEQ, BATCH, HIDDEN = 12, 8, 4, 32


class CharLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.lstm = nn.LSTM(16, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, x, state):
        out, state = self.lstm(self.embed(x), state)
        return self.head(out), state


def train(model, stream, steps=4):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    state = (torch.zeros(1, BATCH, HIDDEN), torch.zeros(1, BATCH, HIDDEN))
    for step in range(steps):
        x = stream[:, step * SEQ:(step + 1) * SEQ]
        y = stream[:, step * SEQ + 1:(step + 1) * SEQ + 1]
        logits, state = model(x, state)
        loss = criterion(logits.reshape(-1, VOCAB), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    stream = torch.randint(0, VOCAB, (BATCH, 5 * SEQ + 1))
    print(f"final loss {train(CharLSTM(), stream):.3f}")
