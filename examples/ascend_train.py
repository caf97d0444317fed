# A training script written for Ascend NPUs, as Ascend's migration guide
# and model scripts write them: torch_npu imported, the 'npu' device,
# .npu(), torch_npu's AMP and its automatic-migration one-liner, and a
# small language model on torch_npu's fused operators (npu_rms_norm,
# npu_rotary_mul, npu_fusion_attention, npu_swiglu).  Synthetic data.
#
# On a machine without Ascend hardware it runs on the virtual NPU:
#     python -m transfer_to_npu examples/ascend_train.py
import math
import sys

import torch
import torch_npu
from torch_npu.npu import amp
from torch_npu.contrib import transfer_to_npu  # noqa: F401  (Ascend's one-liner)

VOCAB, DIM, HEADS, SEQ, BATCH = 64, 32, 4, 16, 8
HEAD_DIM = DIM // HEADS


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = torch.nn.Parameter(torch.ones(DIM))
        self.norm2 = torch.nn.Parameter(torch.ones(DIM))
        self.qkv = torch.nn.Linear(DIM, 3 * DIM, bias=False)
        self.out = torch.nn.Linear(DIM, DIM, bias=False)
        self.up = torch.nn.Linear(DIM, 4 * DIM, bias=False)  # gate and up, for SwiGLU
        self.down = torch.nn.Linear(2 * DIM, DIM, bias=False)

    def forward(self, x, cos, sin, mask):
        h = torch_npu.npu_rms_norm(x, self.norm1, epsilon=1e-6)[0]
        q, k, v = self.qkv(h).view(BATCH, SEQ, 3, HEADS, HEAD_DIM).unbind(2)  # BSND
        q = torch_npu.npu_rotary_mul(q, cos, sin)
        k = torch_npu.npu_rotary_mul(k, cos, sin)
        attn = torch_npu.npu_fusion_attention(
            q, k, v, HEADS, "BSND", atten_mask=mask, scale=1.0 / math.sqrt(HEAD_DIM),
            sparse_mode=2)[0]  # causal, aligned at the top left
        x = x + self.out(attn.reshape(BATCH, SEQ, DIM))
        h = torch_npu.npu_rms_norm(x, self.norm2, epsilon=1e-6)[0]
        return x + self.down(torch_npu.npu_swiglu(self.up(h), dim=-1))


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(2))
        self.head = torch.nn.Linear(DIM, VOCAB)

    def forward(self, ids, cos, sin, mask):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, cos, sin, mask)
        return self.head(x)


def rotary(device):
    inv = 1.0 / (10000 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
    angles = torch.outer(torch.arange(SEQ).float(), inv)
    angles = torch.cat((angles, angles), dim=-1)[None, :, None, :]  # 1S1D, as BSND wants
    return angles.cos().to(device), angles.sin().to(device)


def main(steps=30):
    torch.npu.set_compile_mode(jit_compile=False)
    torch.npu.config.allow_internal_format = False
    torch.npu.set_device(0)
    device = torch.device("npu:0")
    torch.manual_seed(0)
    model = TinyLM().npu()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = amp.GradScaler()
    cos, sin = rotary(device)
    # Ascend's compressed causal mask: True above the diagonal is dropped.
    mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=device), diagonal=1)
    g = torch.Generator().manual_seed(0)
    data = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    ids, labels = data[:, :-1].npu(), data[:, 1:].npu()
    for step in range(steps):
        with amp.autocast():
            logits = model(ids, cos, sin, mask)
            loss = torch.nn.functional.cross_entropy(logits.float().view(-1, VOCAB), labels.reshape(-1))
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        torch_npu.npu.synchronize()
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step} loss {loss.item():.4f} on {logits.device}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
