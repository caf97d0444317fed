"""Run at interpreter start by transfer_to_npu.pth (installed with the
package): with TRANSFER_TO_NPU=1, every Python process that imports torch
is migrated, so ``TRANSFER_TO_NPU=1 torchrun train.py`` migrates an unedited
script and every process it starts.

It costs nothing otherwise: the .pth line imports this module only when the
variable is set, and this module imports neither torch nor transfer_to_npu
until torch itself is imported.
"""

import importlib.abc
import os
import sys

_ON = ("1", "true", "yes", "on")


def wanted():
    return os.environ.get("TRANSFER_TO_NPU", "").strip().lower() in _ON


class _TorchImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when torch's spec is found, wraps its loader so
    that migration is enabled as soon as torch has finished importing."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)  # once, and never for our own lookup below
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_migrate(module):
            exec_module(module)
            import transfer_to_npu  # noqa: F401  (enables on import)

        spec.loader.exec_module = exec_then_migrate
        return spec


def install():
    if "torch" in sys.modules:
        import transfer_to_npu  # noqa: F401
    elif not any(isinstance(f, _TorchImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchImportFinder())


if wanted():
    install()
