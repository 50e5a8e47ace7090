import torch
from torch import nn


class SentimentHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.EmbeddingBag(1000, 128, mode="mean")
        self.dropout = nn.Dropout(0.1)
        self.out = nn.Linear(in_features=128, out_features=2)

    def forward(self, tokens):
        return self.out(self.dropout(self.embed(tokens)))


torch.manual_seed(0)
model = SentimentHead()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.randint(0, 1000, (16, 12))
labels = torch.randint(0, 2, (16,))
for step in range(4):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(tokens), labels)
    loss.backward()
    optimizer.step()
print("loss", loss.item())
