import os
from contextlib import nullcontext

import torch
import torch.nn as nn

# config
batch_size = 8
learning_rate = 1e-3
max_iters = 5
device = 'cuda' if torch.cuda.is_available() else 'cpu'  # examples: 'cpu', 'cuda', 'cuda:0', 'cuda:1' etc., or try 'mps' on macbooks
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'
compile = False

ddp = int(os.environ.get('RANK', -1)) != -1  # is this a ddp run?
if ddp:
    ddp_local_rank = int(os.environ['LOCAL_RANK'])
    device = f'cuda:{ddp_local_rank}'
    torch.cuda.set_device(device)

device_type = 'cuda' if 'cuda' in device else 'cpu'  # for later use in torch.autocast
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

torch.manual_seed(1337)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
model.to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)


def get_batch():
    x = torch.randn(batch_size, 16)
    y = torch.randn(batch_size, 16)
    if device_type == 'cuda':
        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y


for it in range(max_iters):
    X, Y = get_batch()
    with ctx:
        loss = nn.functional.mse_loss(model(X), Y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
print(loss.item())
