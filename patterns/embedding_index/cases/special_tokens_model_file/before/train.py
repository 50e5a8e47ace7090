"""Part-of-speech tagger; sentences are wrapped in <bos> ... <eos> markers by the encoder."""
import torch
import torch.nn as nn

from model import Tagger

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
TAGS = ["DET", "NOUN", "VERB", "ADP"]
word_ids = {w: i for i, w in enumerate(WORDS)}
BOS, EOS = len(WORDS), len(WORDS) + 1  # special tokens appended after the words


def encode(sentence):
    return [BOS] + [word_ids[w] for w in sentence.split()] + [EOS]


sentences = ["the cat sat on a mat", "a dog ran on the mat"]
tags = [[0, 0, 1, 2, 3, 0, 1, 0], [0, 0, 1, 2, 3, 0, 1, 0]]
tokens = torch.tensor([encode(s) for s in sentences])
targets = torch.tensor(tags)

model = Tagger(vocab_size=len(WORDS), n_tags=len(TAGS))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(5):
    logits = model(tokens)
    loss = nn.functional.cross_entropy(logits.reshape(-1, len(TAGS)), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
