import torch
import torch.nn as tnn
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"

torch.manual_seed(0)
images = torch.randn(64, 1, 16, 16)
labels = torch.randint(0, 10, (64,))
loader = DataLoader(TensorDataset(images, labels), batch_size=8, shuffle=True)

model = tnn.Sequential(
    tnn.Conv2d(1, 8, 3, padding=1),
    tnn.ReLU(),
    tnn.MaxPool2d(2),
    tnn.Flatten(),
    tnn.Linear(8 * 8 * 8, 10),
).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = tnn.CrossEntropyLoss()

for epoch in range(2):
    for batch_images, batch_labels in loader:
        logits = model(batch_images)
        loss = criterion(logits, batch_labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss={loss.item():.3f}")
