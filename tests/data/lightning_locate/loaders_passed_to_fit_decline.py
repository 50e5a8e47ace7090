import numpy as np
import torch
import lightning as L
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


class TabularDataModule(L.LightningDataModule):
    def __init__(self, batch_size: int = 16):
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        rng = np.random.default_rng(0)
        features = rng.normal(size=(64, 8))
        labels = rng.integers(0, 3, size=64)
        x = torch.from_numpy(features)
        y = torch.from_numpy(labels)
        self.train_set = TensorDataset(x[:48], y[:48])
        self.val_set = TensorDataset(x[48:], y[48:])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch_size)


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(8, 3)

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.cross_entropy(self(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    # the module's own loaders (float32); the script passes other loaders to fit, which Lightning
    # uses instead, so these are not where the failing batch comes from
    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(48, 8), torch.randint(0, 3, (48,))), batch_size=16)

    def val_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(16, 8), torch.randint(0, 3, (16,))), batch_size=16)


if __name__ == "__main__":
    trainer = L.Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=2,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False)
    data = TabularDataModule()
    data.setup()
    trainer.fit(Classifier(), data.train_dataloader(), data.val_dataloader())
