"""torch_npu's settings of its kernels and graph compiler, which Ascend's
scripts set at their start (``torch.npu.set_compile_mode(jit_compile=
False)``, ``torch.npu.config.allow_internal_format = False``): on the
virtual NPU, whose kernels are the host's and which has one tensor format
and no graph compiler, each is accepted and checked, and changes nothing."""

__all__ = ["config", "conv", "matmul", "set_compile_mode", "set_option"]


def set_compile_mode(jit_compile=False):
    if not isinstance(jit_compile, bool):
        raise TypeError(f"set_compile_mode: jit_compile={jit_compile!r} must be a bool")


def set_option(option):
    if not isinstance(option, dict):
        raise TypeError(f"set_option: option={option!r} must be a dict")


class _Switches:
    """Boolean switches, as torch_npu's ``npu.config``, ``npu.matmul`` and
    ``npu.conv`` hold them."""

    def __init__(self, name, **defaults):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_values", dict(defaults))

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"torch.npu.{self._name} has no setting {name!r}") from None

    def __setattr__(self, name, value):
        if name not in self._values:
            raise AttributeError(f"torch.npu.{self._name} has no setting {name!r}")
        if not isinstance(value, bool):
            raise TypeError(f"torch.npu.{self._name}.{name}={value!r} must be a bool")
        self._values[name] = value


config = _Switches("config", allow_internal_format=False)
matmul = _Switches("matmul", allow_hf32=False)
conv = _Switches("conv", allow_hf32=True)
