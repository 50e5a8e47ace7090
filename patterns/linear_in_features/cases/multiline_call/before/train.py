import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(input_size=10, hidden_size=64, batch_first=True)
        self.classifier = nn.Linear(
            128,  # 2 x hidden size (bidirectional)
            5,
        )

    def forward(self, x):
        _, (h, _) = self.rnn(x)
        return self.classifier(h[-1])


torch.manual_seed(0)
model = Encoder()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
seqs, labels = torch.randn(6, 15, 10), torch.randint(0, 5, (6,))
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(seqs), labels)
    loss.backward()
    optimizer.step()
print("loss", loss.item())
