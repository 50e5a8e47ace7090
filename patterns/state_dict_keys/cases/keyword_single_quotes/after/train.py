'''Person re-identification: reuse the pretrained encoder of a GAN.'''
import torch
from train_model import Encoder


net_E = Encoder()
state_dict = torch.load('best_net_E.pth')
net_E.load_state_dict(state_dict={k.removeprefix('module.'): v for k, v in state_dict['state_dict'].items()}, strict=True)
net_E.eval()
print(net_E(torch.rand(2, 3, 32, 16)).shape)
