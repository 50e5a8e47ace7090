import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, in_features=6):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x)


def train(model, features, labels, epochs=5):
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        optimizer.zero_grad()
        logits = model(features)
        loss = criterion(logits.squeeze(1), labels)  # logits (N, 1), labels (N,)
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")
    return model


if __name__ == "__main__":
    torch.manual_seed(0)
    features = torch.randn(8, 6)
    labels = (features[:, 0] > 0).float()
    train(Classifier(), features, labels)
