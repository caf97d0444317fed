"""Run at interpreter start by transfer_to_npu.pth (installed with the
package): with TRANSFER_TO_NPU=1, every Python process that imports torch
is migrated, so ``TRANSFER_TO_NPU=1 torchrun train.py`` migrates an unedited
script and every process it starts (TRANSFER_TO_NPU=rehearse: runs them as
on torch_npu, unmigrated); with TRANSFER_TO_NPU_DUMP=DIR, every such process
is dumped too.

It costs nothing otherwise: the .pth line imports this module only when a
variable is set, and this module imports neither torch nor transfer_to_npu
until torch itself is imported.
"""

import importlib.abc
import os
import sys

_ON = ("1", "true", "yes", "on", "rehearse")


def wanted():
    """Migration (or a rehearsal), or a dump (which the package's import starts; with
    TRANSFER_TO_NPU=0 the run is dumped unmigrated)."""
    return (os.environ.get("TRANSFER_TO_NPU", "").strip().lower() in _ON
            or bool(os.environ.get("TRANSFER_TO_NPU_DUMP")))


class _TorchImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it asks the finders after it for torch's spec
    and wraps its loader, so that migration is enabled as soon as torch has
    finished importing.  It stays on sys.meta_path until torch is imported:
    libraries look torch up (importlib.util.find_spec) before importing it,
    and each look-up makes a spec of its own."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or isinstance(finder, _TorchImportFinder) or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        exec_module = loader.exec_module
        finder = self

        def exec_then_migrate(module):
            exec_module(module)
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            _migrate(module, loader)

        loader.exec_module = exec_then_migrate
        return spec


def _migrate(torch, loader):
    """Migrate torch, just imported.  When that fails (a setting the error
    names), the import of torch fails with the error; torch itself, imported
    whole, is found again by the next ``import torch`` (the script's retry,
    once the setting is fixed), which migrates then: torch's __init__ run a
    second time would fail (torch registers its operators once)."""
    try:
        import transfer_to_npu  # noqa: F401  (enables on import)
    except BaseException:
        loader.create_module = lambda spec: torch
        loader.exec_module = lambda module: _migrate(module, loader)
        sys.meta_path.insert(0, _Imported(torch))
        raise
    loader.__dict__.pop("create_module", None)
    loader.__dict__.pop("exec_module", None)
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Imported)]


class _Imported(importlib.abc.MetaPathFinder):
    """Finds torch, imported already, for migrating again."""

    def __init__(self, torch):
        self.torch = torch

    def find_spec(self, fullname, path=None, target=None):
        return self.torch.__spec__ if fullname == "torch" else None


def install():
    if "torch" in sys.modules:
        import transfer_to_npu  # noqa: F401
    elif not any(isinstance(f, _TorchImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchImportFinder())


if wanted():
    install()
