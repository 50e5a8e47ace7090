"""Caption decoder evaluated with a vocabulary rebuilt from a smaller annotation file."""
import torch
import torch.nn as nn


class Captioner(nn.Module):
    def __init__(self, vocab_size, d_model=64):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.rnn = nn.GRU(d_model, d_model, batch_first=True)
        self.logit = nn.Linear(d_model, vocab_size)

    def forward(self, tokens):
        out, _ = self.rnn(self.embed(tokens))
        return self.logit(out)


def main():
    vocab = [f"w{i}" for i in range(722)]
    model = Captioner(len(vocab))
    checkpoint = torch.load("model_best.pth")
    model.load_state_dict(checkpoint["model"])
    model.eval()
    print(model(torch.randint(0, len(vocab), (2, 7))).shape)


if __name__ == "__main__":
    main()
