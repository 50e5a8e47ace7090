"""A small classifier trained with Hugging Face's Trainer: a user nn.Module and a user Dataset of
dicts, no download."""

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments


class PointsDataset(Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.features = rng.normal(size=(n, 20)).astype(np.float32)
        self.labels = torch.tensor(self.features[:, 0] > 0, dtype=torch.long)

    def __len__(self):
        return len(self.features)

    def __getitem__(self, idx):
        x = torch.from_numpy(self.features[idx])
        return {"x": x, "labels": self.labels[idx]}


class WeightedTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs["labels"]
        outputs = model(x=inputs["x"])
        loss = nn.functional.cross_entropy(outputs["logits"], labels, weight=torch.tensor([1.0, 2.0]))
        return (loss, outputs) if return_outputs else loss


class Classifier(nn.Module):
    def __init__(self, hidden=32, classes=2):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, classes)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, x, labels=None):
        logits = self.head(self.body(x))
        loss = None
        if labels is not None:
            loss = self.loss_fn(logits, labels)
        return {"loss": loss, "logits": logits}


def main():
    train_set = PointsDataset(96, seed=0)
    eval_set = PointsDataset(40, seed=1)
    args = TrainingArguments(
        output_dir="out",
        num_train_epochs=50,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=16,
        learning_rate=1e-2,
        logging_steps=5,
        save_strategy="steps",
        save_steps=10,
        save_total_limit=2,
        report_to="none",
        use_cpu=True,
    )
    trainer = Trainer(model=Classifier(), args=args, train_dataset=train_set, eval_dataset=eval_set)
    trainer.train()
    metrics = trainer.evaluate()
    print("eval loss", round(metrics["eval_loss"], 4))
    predictions = trainer.predict(eval_set)
    print("predictions", predictions.predictions.shape)
    trainer.save_model("out/final")
    print("done")


if __name__ == "__main__":
    main()
