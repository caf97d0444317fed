"""apex.amp on torch's automatic mixed precision.

``initialize(..., opt_level="O1")`` runs each model's forward under
``torch.autocast`` in float16 on the model's device (apex's O1 patches
torch's functions to the same lists of casts), and gives every loss a
dynamic loss scaler; ``scale_loss`` yields the scaled loss and, on leaving,
unscales the gradients of the optimizers, checks them for inf and NaN, and
makes their next ``step()`` a skipped one when they overflowed, halving
the scale (doubled after 2000 good steps), as apex does.  O0 is float32
with a scale of 1.  O2 and O3 (float16 models, float32 master weights)
are not served: they raise, naming torch.autocast.
"""

import contextlib
import types

import torch

__all__ = ["initialize", "load_state_dict", "master_params", "scale_loss", "state_dict"]

OPT_LEVELS = ("O0", "O1", "O2", "O3")


class _LossScaler:
    """apex's dynamic loss scaler (or a static one: ``dynamic=False``)."""

    def __init__(self, scale, dynamic, min_scale=None, max_scale=2.0 ** 24):
        self.scale, self.dynamic = float(scale), dynamic
        self.min_scale, self.max_scale = min_scale, max_scale
        self.unskipped = 0

    def unscale(self, grads):
        """Divide the gradients by the scale in place; whether any is not
        finite."""
        found = False
        groups = {}
        for g in grads:
            groups.setdefault((g.device, g.dtype), []).append(g)
        for (device, _), same in groups.items():
            found_inf = torch.zeros(1, dtype=torch.float32, device=device)
            inv_scale = torch.full((1,), 1.0 / self.scale, dtype=torch.float32, device=device)
            torch._amp_foreach_non_finite_check_and_unscale_(same, found_inf, inv_scale)
            found = found or bool(found_inf.item())
        return found

    def update(self, overflow):
        if not self.dynamic:
            return
        if overflow:
            self.scale /= 2.0
            if self.min_scale is not None:
                self.scale = max(self.scale, self.min_scale)
            self.unskipped = 0
            return
        self.unskipped += 1
        if self.unskipped == 2000:
            self.scale = min(self.max_scale, self.scale * 2.0)
            self.unskipped = 0


class _AutocastForward:
    """A model's forward run under torch.autocast in float16 (O1)."""

    def __init__(self, forward, device_type):
        self.forward, self.device_type = forward, device_type

    def __call__(self, *args, **kwargs):
        with torch.autocast(self.device_type, dtype=torch.float16):
            return self.forward(*args, **kwargs)


_state = {"opt_level": None, "scalers": []}


def _as_list(objs):
    return list(objs) if isinstance(objs, (list, tuple)) else [objs]


def _amp_step(self, *args, **kwargs):
    """An optimizer's step, skipped once after an overflow."""
    if self._amp_skip_next_step:
        self._amp_skip_next_step = False
        return None
    return self._amp_original_step(*args, **kwargs)


def initialize(models, optimizers=None, enabled=True, opt_level="O1", cast_model_type=None,
               patch_torch_functions=None, keep_batchnorm_fp32=None, master_weights=None,
               loss_scale=None, cast_model_outputs=None, num_losses=1, verbosity=1,
               min_loss_scale=None, max_loss_scale=2.0 ** 24):
    """The models and optimizers as given (the same objects), set up for
    mixed precision at opt_level."""
    result = models if optimizers is None else (models, optimizers)
    if not enabled:
        return result
    if opt_level not in OPT_LEVELS:
        raise RuntimeError(f"apex.amp.initialize: unexpected opt_level={opt_level!r}; options "
                           f"are 'O0', 'O1', 'O2', 'O3'")
    if opt_level in ("O2", "O3"):
        raise NotImplementedError(
            f"apex.amp opt_level={opt_level!r} (a float16 model with float32 master weights) is "
            f"not served on the NPU: use opt_level='O1', or torch.autocast with "
            f"torch.amp.GradScaler")
    if opt_level == "O1":
        for model in _as_list(models):
            param = next(model.parameters(), None)
            device_type = param.device.type if param is not None else "cpu"
            model.forward = _AutocastForward(model.forward, device_type)
        dynamic = loss_scale in (None, "dynamic")
        scale = 2.0 ** 16 if dynamic else loss_scale
    else:
        dynamic, scale = False, 1.0 if loss_scale in (None, "dynamic") else loss_scale
    _state["opt_level"] = opt_level
    _state["scalers"] = [_LossScaler(scale, dynamic, min_loss_scale, max_loss_scale)
                         for _ in range(num_losses)]
    for optimizer in _as_list(optimizers) if optimizers is not None else []:
        if "_amp_original_step" not in optimizer.__dict__:
            optimizer._amp_original_step = optimizer.step
            optimizer._amp_skip_next_step = False
            # A bound method, as torch's LR schedulers expect to find.
            optimizer.step = types.MethodType(_amp_step, optimizer)
    return result


@contextlib.contextmanager
def scale_loss(loss, optimizers, loss_id=0, model=None, delay_unscale=False,
               delay_overflow_check=False):
    """``with scale_loss(loss, optimizer) as scaled: scaled.backward()``."""
    if _state["opt_level"] is None:
        raise RuntimeError("apex.amp.scale_loss: amp.initialize(model, optimizer, opt_level=...) "
                           "must be called first")
    if not 0 <= loss_id < len(_state["scalers"]):
        raise ValueError(f"apex.amp.scale_loss: loss_id={loss_id!r} is not below num_losses="
                         f"{len(_state['scalers'])}")
    scaler = _state["scalers"][loss_id]
    yield loss.float() * scaler.scale
    if delay_unscale:
        return
    opts = _as_list(optimizers)
    grads = [p.grad for opt in opts for group in opt.param_groups for p in group["params"]
             if p.grad is not None]
    overflow = scaler.unscale(grads) if grads and scaler.scale != 1.0 else False
    scaler.update(overflow)
    if overflow:
        for opt in opts:
            opt._amp_skip_next_step = True


def master_params(optimizer):
    """The parameters the optimizer updates (with O0 and O1, the model's)."""
    for group in optimizer.param_groups:
        yield from group["params"]


def state_dict(destination=None):
    out = {} if destination is None else destination
    for i, scaler in enumerate(_state["scalers"]):
        out[f"loss_scaler{i}"] = {"loss_scale": scaler.scale, "unskipped": scaler.unskipped}
    return out


def load_state_dict(state):
    for i, scaler in enumerate(_state["scalers"]):
        saved = state.get(f"loss_scaler{i}")
        if saved is not None:
            scaler.scale, scaler.unskipped = float(saved["loss_scale"]), int(saved["unskipped"])
