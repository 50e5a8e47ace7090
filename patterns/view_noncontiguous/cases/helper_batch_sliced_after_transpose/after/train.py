import torch
import torch.nn as nn

torch.manual_seed(0)
vocab, steps = 20, 6


def prepare_batch(trg):
    # trg is time-major (T, B); the model wants batch-major, shifted by one for the gold
    prev_tgt_tokens = trg.transpose(0, 1)[:, :-1]
    tgt_tokens = trg.transpose(0, 1)[:, 1:]
    return prev_tgt_tokens, tgt_tokens


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.out = nn.Linear(16, vocab)

    def forward(self, tokens):
        return self.out(self.embed(tokens))


model = Decoder()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


def cal_performance(pred, gold):
    pred = pred.reshape(-1, pred.size(-1))
    gold = gold.reshape(-1)
    return criterion(pred, gold), pred.argmax(-1).eq(gold).sum().item()


for step in range(5):
    trg = torch.randint(0, vocab, (steps + 1, 4))
    prev_tgt_tokens, tgt_tokens = prepare_batch(trg)
    optimizer.zero_grad()
    loss, n_correct = cal_performance(model(prev_tgt_tokens), tgt_tokens)
    loss.backward()
    optimizer.step()
    print(step, loss.item(), n_correct)
