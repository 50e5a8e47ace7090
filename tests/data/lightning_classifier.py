import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LitClassifier(L.LightningModule):
    def __init__(self, hidden=64):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.fc1 = nn.Linear(32 * 7 * 7, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = self.conv(x)
        x = x.flatten(1)
        return self.fc2(torch.relu(self.fc1(x)))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self(x), y))

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("test_loss", nn.functional.cross_entropy(self(x), y))

    def predict_step(self, batch, batch_idx):
        return self(batch[0]).argmax(1)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


class TrainEnd(L.Callback):
    def on_train_end(self, trainer, pl_module):
        print("on_train_end at step", trainer.global_step)


def loader(n, seed, shuffle=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=16, shuffle=shuffle)


if __name__ == "__main__":
    model = LitClassifier()
    trainer = L.Trainer(max_epochs=50, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, callbacks=[TrainEnd()])
    trainer.fit(model, loader(64, 0, shuffle=True), loader(32, 1))
    print("fit returned at step", trainer.global_step, "epoch", trainer.current_epoch, "should_stop", trainer.should_stop)
    trainer.test(model, loader(32, 2))
    trainer.save_checkpoint("final.ckpt")
    preds = trainer.predict(model, loader(32, 3))
    print("predicted", sum(len(p) for p in preds))
