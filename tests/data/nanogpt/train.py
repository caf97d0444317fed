"""Training in the shape of nanoGPT's train.py, tiny and on synthetic
tokens: the device, its type, autocast, pinned batches and fused AdamW
decided from `device` as nanoGPT decides them."""
from contextlib import nullcontext

import torch

from model import GPT

device = 'cuda'  # examples: 'cpu', 'cuda', 'cuda:0', 'cuda:1' etc.
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'
batch_size, block_size, max_iters = 4, 16, 3

torch.manual_seed(1337)
torch.backends.cuda.matmul.allow_tf32 = True  # allow tf32 on matmul
torch.backends.cudnn.allow_tf32 = True  # allow tf32 on cudnn
device_type = 'cuda' if 'cuda' in device else 'cpu'  # for later use in torch.autocast
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type,
                                                                     dtype=ptdtype)
data = torch.randint(0, 64, (1000,))


def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
    if device_type == 'cuda':
        # pin arrays x,y, which allows us to move them to GPU asynchronously (non_blocking=True)
        x, y = x.pin_memory(), y.pin_memory()
        print(f"pinned: {x.is_pinned()}")
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y


model = GPT(block_size=block_size)
model.to(device)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))
optimizer = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), device_type)
for it in range(max_iters):
    X, Y = get_batch()
    with ctx:
        logits, loss = model(X, Y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    print(f"iter {it}: loss {loss.item():.4f} on {X.device}, device_type {device_type}, "
          f"activations {model.last_activation_dtype}, tf32 {torch.backends.cuda.matmul.allow_tf32}")
