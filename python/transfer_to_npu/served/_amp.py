"""apex.amp on torch's automatic mixed precision.

``initialize(models, optimizers, opt_level=...)`` sets the models and
optimizers up as apex's opt levels do, with apex's overrides
(``cast_model_type``, ``keep_batchnorm_fp32``, ``master_weights``,
``loss_scale``, ``cast_model_outputs``):

* O0: float32 models, a loss scale of 1;
* O1: each model's forward runs under ``torch.autocast`` in float16 on the
  model's device (apex's O1 patches torch's functions to the same lists of
  casts), with a dynamic loss scale;
* O2: float16 models but for their batch norms, whose forward takes its
  floating-point inputs in float16 and gives its outputs in float32; each
  optimizer updates float32 master copies of the float16 parameters,
  copied back into the model after each step; a dynamic loss scale;
* O3: float16 models throughout, a loss scale of 1.

``scale_loss`` yields the loss times the scale and, on leaving, unscales
the gradients of this backward (into the master gradients under O2),
adding them to those of earlier backwards, so that gradients accumulated
over several losses come out right; with a dynamic scale it checks them
for inf and NaN and makes the optimizers' next ``step()`` a skipped one
when they overflowed, halving the scale (doubled after 2000 good steps),
as apex does.
"""

import contextlib
import types
from collections.abc import Mapping

import torch

__all__ = ["initialize", "load_state_dict", "master_params", "scale_loss", "state_dict"]

# apex's properties of each opt level, which initialize's arguments of the
# same names override.
OPT_LEVELS = {
    "O0": {"cast_model_type": torch.float32, "patch_torch_functions": False,
           "keep_batchnorm_fp32": None, "master_weights": False, "loss_scale": 1.0},
    "O1": {"cast_model_type": None, "patch_torch_functions": True,
           "keep_batchnorm_fp32": None, "master_weights": False, "loss_scale": "dynamic"},
    "O2": {"cast_model_type": torch.float16, "patch_torch_functions": False,
           "keep_batchnorm_fp32": True, "master_weights": True, "loss_scale": "dynamic"},
    "O3": {"cast_model_type": torch.float16, "patch_torch_functions": False,
           "keep_batchnorm_fp32": False, "master_weights": False, "loss_scale": 1.0},
}


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


def _cast(value, dtype):
    """value with its floating-point tensors (in tuples, lists and mappings
    too) of dtype."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, Mapping):
        cast = {k: _cast(v, dtype) for k, v in value.items()}
        return cast if type(value) is dict else _same_mapping(value, cast)
    if isinstance(value, (tuple, list)):
        cast = [_cast(v, dtype) for v in value]
        return type(value)(*cast) if hasattr(value, "_fields") else type(value)(cast)
    return value


def _same_mapping(value, cast):
    # A model's output of a dict type (a ModelOutput) stays of its type.
    try:
        return type(value)(cast)
    except TypeError:
        return cast


class _AutocastForward:
    """A model's forward run under torch.autocast in float16 (O1)."""

    def __init__(self, forward, device_type):
        self.forward, self.device_type = forward, device_type

    def __call__(self, *args, **kwargs):
        with torch.autocast(self.device_type, dtype=torch.float16):
            return self.forward(*args, **kwargs)


class _CastForward:
    """A model's forward given its floating-point inputs in the model's
    type (``to``, or as they come: None) and giving its outputs in
    ``outputs`` (O2, O3, cast_model_outputs)."""

    def __init__(self, forward, to, outputs):
        self.forward, self.to, self.outputs = forward, to, outputs

    def __call__(self, *args, **kwargs):
        if self.to is not None:
            args, kwargs = _cast(args, self.to), _cast(kwargs, self.to)
        return _cast(self.forward(*args, **kwargs), self.outputs)


def _cast_model(model, dtype, keep_batchnorm_fp32):
    """The model's floating-point parameters and buffers made dtype in
    place (the same Parameter objects, as optimizers hold them), but for
    those of affine batch norms when keep_batchnorm_fp32."""
    for module in model.modules():
        if (keep_batchnorm_fp32 and isinstance(module, torch.nn.modules.batchnorm._BatchNorm)
                and module.affine):
            continue
        for tensor in (*module.parameters(recurse=False), *module.buffers(recurse=False)):
            if tensor.is_floating_point():
                tensor.data = tensor.data.to(dtype)


def _add_masters(optimizer):
    """The optimizer made to update a float32 master copy of each float16
    (or bfloat16) parameter it holds: (parameter, master) pairs."""
    pairs = []
    for group in optimizer.param_groups:
        for i, param in enumerate(group["params"]):
            if param.requires_grad and param.dtype in (torch.float16, torch.bfloat16):
                master = param.detach().clone().float().requires_grad_(True)
                group["params"][i] = master
                if param in optimizer.state:
                    optimizer.state[master] = optimizer.state.pop(param)
                pairs.append((param, master))
    if optimizer.state:
        # Loading recasts the state of each parameter to its master's type.
        optimizer.load_state_dict(optimizer.state_dict())
    return pairs


_state = {"opt_level": None, "scalers": []}


def _as_list(objs):
    return list(objs) if isinstance(objs, (list, tuple)) else [objs]


def _amp_step(self, *args, **kwargs):
    """An optimizer's step, skipped once after an overflow; the masters'
    values then copied into the model, and their gradients dropped (those
    of the model are for zero_grad to clear)."""
    if self._amp_skip_next_step:
        self._amp_skip_next_step = False
        out = None
    else:
        out = self._amp_original_step(*args, **kwargs)
        with torch.no_grad():
            for param, master in self._amp_masters:
                param.copy_(master)
    for _, master in self._amp_masters:
        master.grad = None
    return out


def _amp_zero_grad(self, *args, **kwargs):
    """An optimizer's zero_grad, which with master weights also clears the
    model's gradients."""
    for param, _ in self._amp_masters:
        param.grad = None
    return self._amp_original_zero_grad(*args, **kwargs)


def _properties(opt_level, overrides):
    if opt_level not in OPT_LEVELS:
        raise RuntimeError(f"apex.amp.initialize: unexpected opt_level={opt_level!r}; options "
                           f"are 'O0', 'O1', 'O2', 'O3'")
    properties = dict(OPT_LEVELS[opt_level])
    for name, value in overrides.items():
        if value is None:
            continue
        if name == "keep_batchnorm_fp32" and isinstance(value, str):
            # apex takes it as written on a command line too.
            if value not in ("True", "False"):
                raise ValueError(f"apex.amp.initialize: keep_batchnorm_fp32 must be True or "
                                 f"False, got {value!r}")
            value = value == "True"
        if name == "loss_scale" and value != "dynamic":
            value = float(value)
        properties[name] = value
    return properties


def initialize(models, optimizers=None, enabled=True, opt_level="O1", cast_model_type=None,
               patch_torch_functions=None, keep_batchnorm_fp32=None, master_weights=None,
               loss_scale=None, cast_model_outputs=None, num_losses=1, verbosity=1,
               min_loss_scale=None, max_loss_scale=2.0 ** 24):
    """The models and optimizers as given (the same objects), set up for
    mixed precision at opt_level."""
    result = models if optimizers is None else (models, optimizers)
    if not enabled:
        return result
    properties = _properties(opt_level, {
        "cast_model_type": cast_model_type, "patch_torch_functions": patch_torch_functions,
        "keep_batchnorm_fp32": keep_batchnorm_fp32, "master_weights": master_weights,
        "loss_scale": loss_scale})
    cast_to = properties["cast_model_type"]
    for model in _as_list(models):
        if cast_to is not None:
            _cast_model(model, cast_to, properties["keep_batchnorm_fp32"])
        if properties["patch_torch_functions"]:
            param = next(model.parameters(), None)
            device_type = param.device.type if param is not None else "cpu"
            model.forward = _AutocastForward(model.forward, device_type)
        if cast_to is not None or cast_model_outputs is not None:
            model.forward = _CastForward(model.forward, cast_to,
                                         cast_model_outputs or torch.float32)
    dynamic = properties["loss_scale"] == "dynamic"
    scale = 2.0 ** 16 if dynamic else properties["loss_scale"]
    _state["opt_level"] = opt_level
    _state["scalers"] = [_LossScaler(scale, dynamic, min_loss_scale, max_loss_scale)
                         for _ in range(num_losses)]
    for optimizer in _as_list(optimizers) if optimizers is not None else []:
        if "_amp_original_step" in optimizer.__dict__:
            raise RuntimeError("apex.amp.initialize: an optimizer is passed through "
                               "amp.initialize once")
        optimizer._amp_masters = _add_masters(optimizer) if properties["master_weights"] else []
        optimizer._amp_stash = None
        optimizer._amp_original_step = optimizer.step
        optimizer._amp_skip_next_step = False
        # Bound methods, as torch's LR schedulers expect to find.
        optimizer.step = types.MethodType(_amp_step, optimizer)
        if optimizer._amp_masters:
            optimizer._amp_original_zero_grad = optimizer.zero_grad
            optimizer.zero_grad = types.MethodType(_amp_zero_grad, optimizer)
    return result


def _model_params(optimizer):
    """The parameters whose gradients a backward gives: the model's (a
    master's model parameter in its place)."""
    masters = {id(m): p for p, m in optimizer._amp_masters}
    return [masters.get(id(p), p) for group in optimizer.param_groups for p in group["params"]]


def _stash(optimizers):
    """Set aside the gradients the parameters hold (unscaled, of earlier
    backwards), so that the backward gives only its own, scaled."""
    for opt in optimizers:
        if opt._amp_stash is None:
            opt._amp_stash = [(p, p.grad) for p in _model_params(opt)]
            for p, _ in opt._amp_stash:
                p.grad = None


def _unscale(optimizers, scaler):
    """Unscale the backward's gradients and add them to those set aside
    (with master weights, into the masters' gradients); whether any
    overflowed."""
    masters, fresh, merges = {}, [], []
    for opt in optimizers:
        masters.update((id(p), m) for p, m in opt._amp_masters)
        stash, opt._amp_stash = opt._amp_stash or [], None
        for p, earlier in stash:
            master = masters.get(id(p))
            if master is not None:
                if p.grad is not None:
                    grad = p.grad.float()
                    fresh.append(grad)
                    merges.append((master, grad, master.grad))
            elif p.grad is None:
                p.grad = earlier
            else:
                fresh.append(p.grad)
                merges.append((p, p.grad, earlier))
    overflow = False
    if fresh and scaler.scale != 1.0:
        overflow = scaler.unscale(fresh)
    for target, grad, earlier in merges:
        target.grad = grad if earlier is None else earlier.add_(grad)
    return overflow and scaler.dynamic


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
    opts = _as_list(optimizers)
    for opt in opts:
        if "_amp_original_step" not in opt.__dict__:
            raise RuntimeError(f"apex.amp.scale_loss: the optimizer {type(opt).__name__} was "
                               f"not passed through amp.initialize")
    # With delay_unscale, the gradients stay scaled, and the backwards that
    # follow add theirs to them, until a scale_loss without it.
    _stash(opts)
    yield loss.float() * scaler.scale
    if delay_unscale:
        return
    overflow = _unscale(opts, scaler)
    scaler.update(overflow)
    if overflow:
        for opt in opts:
            opt._amp_skip_next_step = True


def master_params(optimizer):
    """The parameters the optimizer updates: with O2, the float32 masters;
    else the model's."""
    for group in optimizer.param_groups:
        yield from group["params"]


def state_dict(destination=None):
    out = {} if destination is None else destination
    for i, scaler in enumerate(_state["scalers"]):
        out[f"loss_scaler{i}"] = {"loss_scale": scaler.scale, "unskipped": scaler.unskipped}
    return out


def load_state_dict(state_dict):
    for i, scaler in enumerate(_state["scalers"]):
        saved = state_dict.get(f"loss_scaler{i}")
        if saved is not None:
            scaler.scale, scaler.unskipped = float(saved["loss_scale"]), int(saved["unskipped"])
