from dataclasses import dataclass


@dataclass
class TrainConfig:
    lr: float = 0.01
    epochs: int = 2
    hidden: int = 16
