"""A patch classifier whose in_channels default is passed down to its patch embedding."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class PatchEmbedding(nn.Module):
    def __init__(self, in_channels=3, patch_size=8, embedding_dim=16):
        super().__init__()
        self.patcher = nn.Conv2d(in_channels=in_channels, out_channels=embedding_dim,
                                 kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        return self.patcher(x).flatten(2).transpose(1, 2)


class PatchClassifier(nn.Module):
    def __init__(self, in_channels=3, patch_size=8, embedding_dim=16, num_classes=10):
        super().__init__()
        self.patch_embedding = PatchEmbedding(in_channels=in_channels,
                                              patch_size=patch_size,
                                              embedding_dim=embedding_dim)
        self.head = nn.Linear(embedding_dim, num_classes)

    def forward(self, x):
        return self.head(self.patch_embedding(x).mean(1))


digits = TensorDataset(torch.rand(12, 1, 32, 32), torch.randint(0, 10, (12,)))
loader = DataLoader(digits, batch_size=4, shuffle=True)
model = PatchClassifier(patch_size=8,
                        num_classes=10, in_channels=1)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for images, labels in loader:
    loss = nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
