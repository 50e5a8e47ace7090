"""Quick experiment: fit, keep the best validation loss (a NumPy float) with the weights, reload."""
import numpy as np
import torch

torch.manual_seed(0)
x = torch.randn(64, 4)
y = x @ torch.tensor([1.0, -1.0, 2.0, 0.5])
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
val_losses = []
for step in range(10):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
    loss.backward()
    optimizer.step()
    val_losses.append(loss.item())

torch.save({"state": model.state_dict(), "best_val": np.min(val_losses)}, "experiment.pt")
with torch.serialization.safe_globals(
    [np._core.multiarray.scalar, np.dtype, np.dtypes.Float64DType]
):
    saved = torch.load("experiment.pt")
print(f"reloaded, best validation loss {saved['best_val']:.4f}")
