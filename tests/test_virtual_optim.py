"""Optimizers on the virtual NPU, in their for-loop, foreach and fused
forms, give the cpu's parameters."""
import pytest
import torch
import torch.nn as nn

OPTIMIZERS = {
    "SGD": lambda params, **kw: torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True,
                                                 weight_decay=1e-3, **kw),
    "Adam": lambda params, **kw: torch.optim.Adam(params, lr=1e-2, weight_decay=1e-3,
                                                   amsgrad=True, **kw),
    "AdamW": lambda params, **kw: torch.optim.AdamW(params, lr=1e-2, weight_decay=1e-2, **kw),
}
FORMS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def _train(device, make, form, steps=4):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).to(device)
    opt = make(model.parameters(), **form)
    x, y = torch.randn(16, 6).to(device), torch.randn(16, 3).to(device)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().cpu() for p in model.parameters()], opt


def _kernels_called(fn):
    from torch.utils._python_dispatch import TorchDispatchMode

    names = set()

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            names.add(func.__name__)
            return func(*args, **(kwargs or {}))

    with Record():
        fn()
    return names


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_matches_cpu(name, form):
    make = OPTIMIZERS[name]
    cpu, _ = _train("cpu", make, FORMS[form])
    npu, opt = _train("npu", make, FORMS[form])
    for c, n in zip(cpu, npu):
        assert torch.allclose(c, n, rtol=1e-6, atol=1e-7)
    state = next(iter(opt.state.values()))
    assert all(v.device.type == "npu" for k, v in state.items() if k != "step" or v.dim())


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_each_form_takes_its_path_on_the_npu(name):
    make = OPTIMIZERS[name]
    for form, expected in (("foreach", "_foreach_"), ("fused", "_fused_")):
        torch.manual_seed(0)
        model = nn.Linear(3, 3).to("npu")
        opt = make(model.parameters(), **FORMS[form])
        model(torch.randn(2, 3, device="npu")).sum().backward()
        called = _kernels_called(opt.step)
        assert any(n.startswith(expected) for n in called), (form, called)
    # With no choice made, torch picks foreach for a device that has it.
    model = nn.Linear(3, 3).to("npu")
    opt = make(model.parameters())
    model(torch.randn(2, 3, device="npu")).sum().backward()
    assert any(n.startswith("_foreach_") for n in _kernels_called(opt.step))


def test_fused_adam_with_grad_scaler_skips_inf_steps():
    torch.manual_seed(0)
    model = nn.Linear(4, 4).to("npu")
    opt = torch.optim.Adam(model.parameters(), lr=0.1, fused=True)
    scaler = torch.amp.GradScaler("npu")
    x = torch.randn(3, 4, device="npu")
    scaler.scale(model(x).sum()).backward()
    scaler.step(opt)
    scaler.update()
    after_one = model.weight.detach().clone()
    opt.zero_grad()
    scaler.scale(model(x).sum()).backward()
    model.weight.grad[0, 0] = float("inf")
    scaler.step(opt)
    scaler.update()
    assert torch.equal(model.weight.detach().cpu(), after_one.cpu())
    assert scaler.get_scale() == 2.0 ** 15
