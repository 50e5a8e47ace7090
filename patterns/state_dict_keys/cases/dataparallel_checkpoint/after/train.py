"""Test a recurrent maze solver trained on several GPUs (saved from nn.DataParallel)."""
import torch

from net import DTNet


def load_model_from_checkpoint(path):
    net = DTNet()
    net.load_state_dict({k.removeprefix("module."): v for k, v in torch.load(path, map_location="cpu").items()})
    return net


model = load_model_from_checkpoint("dt_net_mazes.pth")
model.eval()
with torch.no_grad():
    print(model(torch.rand(2, 3, 9, 9), iters=5).argmax(1).float().mean())
