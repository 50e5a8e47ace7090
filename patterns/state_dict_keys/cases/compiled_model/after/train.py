"""Reload a small GPT trained with torch.compile and generate a few tokens."""
import torch
import torch.nn as nn


class GPTModel(nn.Module):
    def __init__(self, vocab=50, dim=32):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, dim)
        self.pos_emb = nn.Embedding(16, dim)
        self.trf = nn.TransformerEncoderLayer(dim, 4, 64, batch_first=True)
        self.out_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        return self.out_head(self.trf(self.tok_emb(idx) + self.pos_emb(pos)))


if __name__ == "__main__":
    model = GPTModel()
    model.load_state_dict({k.removeprefix("_orig_mod."): v for k, v in torch.load("model.pth", weights_only=True).items()})
    model.eval()
    idx = torch.zeros(1, 1, dtype=torch.long)
    for _ in range(5):
        idx = torch.cat([idx, model(idx)[:, -1].argmax(-1, keepdim=True)], dim=1)
    print(idx.tolist())
