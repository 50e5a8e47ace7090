"""Contrastive loss over a batch with a margin mask built for the whole dataset."""
import torch
import torch.nn as nn

encoder = nn.Linear(16, 8)
optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1)
reactants, products = torch.randn(24, 16), torch.randn(24, 16)
margin = 4.0


def calculate_loss(reactant_embeddings, product_embeddings, n_all):
    dist = torch.cdist(reactant_embeddings, product_embeddings, p=2)
    pos = torch.diag(dist)
    mask = torch.eye(n_all)
    neg = (1 - mask) * dist + mask * margin
    return pos.mean() + torch.relu(margin - neg).mean()


for start in range(0, 24, 8):
    r = encoder(reactants[start:start + 8])
    p = encoder(products[start:start + 8])
    loss = calculate_loss(r, p, len(reactants))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
