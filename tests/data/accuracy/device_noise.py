"""Noise drawn on the device from a device tensor, as a VAE's
reparameterization or a diffusion model's forward process draws it: a
compare's runs draw it on the host, alike (docs/accuracy.md)."""
import torch

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
net = torch.nn.Linear(8, 8).to(device)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(3):
    x = torch.ones(4, 8, device=device)
    noise = torch.randn_like(x)  # DRAW
    loss = net(x + noise).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(loss.item())
