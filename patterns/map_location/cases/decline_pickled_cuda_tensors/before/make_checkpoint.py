import pickle

import torch

history = {"train_loss": torch.tensor([0.9, 0.5, 0.4]), "epochs": 3}
with open("history.pkl", "wb") as f:
    pickle.dump(history, f)
