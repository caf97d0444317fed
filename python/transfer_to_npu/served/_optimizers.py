"""The fused optimizers of apex (FusedAdam, FusedLAMB, FusedSGD) and of
torch_npu (NpuFusedAdam, NpuFusedAdamW, NpuFusedSGD) on torch's
optimizers, whose foreach and fused forms run on the NPU; LAMB, which
torch lacks, as apex computes it."""

import inspect

import torch

__all__ = ["FusedAdam", "FusedLAMB", "FusedSGD", "NpuFusedAdam", "NpuFusedAdamW", "NpuFusedSGD"]

# torch 2.6 and later: Adam with AdamW's decoupled weight decay.
_DECOUPLED = "decoupled_weight_decay" in inspect.signature(torch.optim.Adam.__init__).parameters


class FusedAdam(torch.optim.Adam):
    """apex.optimizers.FusedAdam: Adam, or AdamW (``adam_w_mode``, the
    default), on torch.optim.Adam."""

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8,
                 adam_w_mode=True, weight_decay=0.0, amsgrad=False, set_grad_none=True,
                 capturable=False, master_weights=False):
        if amsgrad:
            raise RuntimeError("FusedAdam does not support the AMSGrad variant.")
        if not bias_correction:
            raise NotImplementedError("FusedAdam(bias_correction=False) has no counterpart in "
                                      "torch.optim on the NPU; use bias_correction=True")
        if master_weights:
            raise NotImplementedError("FusedAdam(master_weights=True): use torch.autocast with "
                                      "float32 parameters instead")
        decay_here = adam_w_mode and not _DECOUPLED
        extra = {"decoupled_weight_decay": adam_w_mode} if _DECOUPLED else {}
        super().__init__(params, lr=lr, betas=betas, eps=eps,
                         weight_decay=0.0 if decay_here else weight_decay, **extra)
        if decay_here:
            for group in self.param_groups:
                group["adam_w_weight_decay"] = weight_decay
            self.register_step_pre_hook(_decay_before_step)
        self.set_grad_none = set_grad_none

    # No step() of its own: torch wraps each optimizer class's step() with
    # its step hooks, and an override calling Adam's would run them twice.

    def zero_grad(self, set_to_none=None):
        super().zero_grad(self.set_grad_none if set_to_none is None else set_to_none)


@torch.no_grad()
def _decay_before_step(optimizer, args, kwargs):
    """AdamW's decay, before Adam's step (torch < 2.6 has no decoupled
    weight decay in Adam)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None and group["adam_w_weight_decay"]:
                p.mul_(1 - group["lr"] * group["adam_w_weight_decay"])


class FusedSGD(torch.optim.SGD):
    """apex.optimizers.FusedSGD on torch.optim.SGD."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, wd_after_momentum=False, materialize_master_grads=True,
                 set_grad_none=False):
        if wd_after_momentum:
            raise NotImplementedError("FusedSGD(wd_after_momentum=True) has no counterpart in "
                                      "torch.optim.SGD; use wd_after_momentum=False")
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening,
                         weight_decay=weight_decay, nesterov=nesterov)
        self.set_grad_none = set_grad_none

    def zero_grad(self, set_to_none=None):
        super().zero_grad(self.set_grad_none if set_to_none is None else set_to_none)


class FusedLAMB(torch.optim.Optimizer):
    """apex.optimizers.FusedLAMB: LAMB (layer-wise adaptive moments), as
    apex computes it: gradients clipped by their global norm to
    ``max_grad_norm``, Adam's moments (with ``grad_averaging``, the first
    one weighs the gradient by 1 - beta1), the weight decay added to the
    update (``adam_w_mode``) or to the gradient, and each parameter's step
    scaled by ||param|| / ||update|| (when weight decay is on, or always
    with ``use_nvlamb``)."""

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-6,
                 weight_decay=0.01, amsgrad=False, adam_w_mode=True, grad_averaging=True,
                 set_grad_none=True, max_grad_norm=1.0, use_nvlamb=False):
        if amsgrad:
            raise RuntimeError("FusedLAMB does not support the AMSGrad variant.")
        defaults = dict(lr=lr, bias_correction=bias_correction, betas=betas, eps=eps,
                        weight_decay=weight_decay, grad_averaging=grad_averaging,
                        max_grad_norm=max_grad_norm)
        super().__init__(params, defaults)
        self.adam_w_mode = adam_w_mode
        self.set_grad_none = set_grad_none
        self.use_nvlamb = use_nvlamb

    def zero_grad(self, set_to_none=None):
        super().zero_grad(self.set_grad_none if set_to_none is None else set_to_none)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not grads:
            return loss
        if any(g.is_sparse for g in grads):
            raise RuntimeError("FusedLAMB does not support sparse gradients")
        global_norm = torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(g.float()) for g in grads]))
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            beta3 = 1 - beta1 if group["grad_averaging"] else 1.0
            max_norm = group["max_grad_norm"]
            clip = (torch.clamp(global_norm / max_norm, min=1.0) if max_norm and max_norm > 0
                    else torch.ones_like(global_norm))
            group["step"] = group.get("step", 0) + 1
            step = group["step"]
            bc1 = 1 - beta1 ** step if group["bias_correction"] else 1.0
            bc2 = 1 - beta2 ** step if group["bias_correction"] else 1.0
            decay = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, dtype=torch.float32)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                w = p.float()
                grad = p.grad.float() / clip
                if not self.adam_w_mode and decay:
                    grad = grad + decay * w
                m.mul_(beta1).add_(grad, alpha=beta3)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                update = (m / bc1) / ((v / bc2).sqrt() + group["eps"])
                if self.adam_w_mode and decay:
                    update = update + decay * w
                if self.use_nvlamb or decay:
                    w_norm, u_norm = torch.linalg.vector_norm(w), torch.linalg.vector_norm(update)
                    ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm,
                                        torch.ones_like(w_norm))
                else:
                    ratio = 1.0
                p.copy_(w - group["lr"] * ratio * update)
        return loss


class _NpuFused:
    """What torch_npu's fused optimizers have of their own: zero_grad()
    zeroes the gradients (set_to_none=False, their default), and
    clip_grad_norm_fused_ clips every group's together."""

    def zero_grad(self, set_to_none=False):
        super().zero_grad(set_to_none)

    def clip_grad_norm_fused_(self, max_norm, norm_type=2):
        """The gradients of every group scaled to a total norm of at most
        max_norm; their total norm before."""
        return torch.nn.utils.clip_grad_norm_(
            [p for group in self.param_groups for p in group["params"]], max_norm, norm_type)


class NpuFusedAdam(_NpuFused, torch.optim.Adam):
    """torch_npu.optim.NpuFusedAdam: torch.optim.Adam."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad)


class NpuFusedAdamW(_NpuFused, torch.optim.AdamW):
    """torch_npu.optim.NpuFusedAdamW: torch.optim.AdamW."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad)


class NpuFusedSGD(_NpuFused, torch.optim.SGD):
    """torch_npu.optim.NpuFusedSGD: torch.optim.SGD."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False):
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening,
                         weight_decay=weight_decay, nesterov=nesterov)
