from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    block_size: int = 8
    vocab_size: int = 27
    n_embd: int = 16
    n_head: int = 4


class BagOfPositions(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.block_size = config.block_size
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.lm_head = nn.Linear(config.block_size * config.n_embd, config.vocab_size)

    def forward(self, idx):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        x = x.view(B, -1)
        return self.lm_head(x)


torch.manual_seed(0)
config = Config()
model = BagOfPositions(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
idx = torch.randint(0, config.vocab_size, (4, config.block_size))
targets = torch.randint(0, config.vocab_size, (4,))
for step in range(3):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(idx), targets)
    loss.backward()
    optimizer.step()
print("ok", loss.item())
