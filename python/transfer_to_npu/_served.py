"""Packages served while migrating: ``torch_npu`` on the virtual NPU (the
virtual NPU presented as Ascend's API), and the CUDA-only packages
``flash_attn``, ``xformers`` and ``apex``, installed or not, on the NPU.

One finder (``Finder``), put first on ``sys.meta_path`` by enable() and
taken off by disable(), which also takes the served names out of
``sys.modules`` (``forget()``): with migration off, ``import torch_npu``
fails as it did, so that a library probing for it does not take every
machine for an Ascend one.  While a converted copy is rehearsed
(rehearse()), it serves torch_npu alone, as an Ascend machine has it.  Each served
name is a module of this package (``served/``), or torch's own, under a
second name, as ``torch.npu.amp`` is served (backends/virtual/npu.py).
Their functions and classes are rows of the mapping table
(``_rules/served.py``): the C core's import hook patches them when the
module loads, so that their calls are counted, logged and reported as
any migrated call is.

A real ``torch_npu`` is never shadowed: the name is served only when no
installed one is found (and on Ascend's backend it is imported already).
Nor is an installed ``apex`` on Ascend's backend, where Ascend ships a port
of it, nor one that is not NVIDIA's (PyPI's "apex" is another project).
A module of a served package that has no counterpart here fails to import,
naming itself and what to use instead.

The finder also gives each served package's distribution metadata
(``importlib.metadata.version("flash_attn")``), its version the
interface's served (the module's ``__version__``): libraries check it
before they use a package (transformers' apex and flash_attn, diffusers'
xformers).
"""

import importlib
import importlib.machinery
import importlib.metadata
import os
import re
import sys

from . import _C, _cuda_only, backends

# Served name -> the module it is (relative: this package's served/).
MODULES = {
    "torch_npu": ".served.torch_npu",
    "torch_npu.npu": "torch.npu",
    "torch_npu.contrib": ".served.torch_npu_contrib",
    "torch_npu.contrib.transfer_to_npu": ".served.torch_npu_transfer",
    "torch_npu.optim": ".served.torch_npu_optim",
    "flash_attn": ".served.flash_attn",
    "flash_attn.flash_attn_interface": ".served.flash_attn",
    "flash_attn.bert_padding": ".served.flash_attn_bert_padding",
    "flash_attn.layers": ".served.flash_attn_rotary",
    "flash_attn.layers.rotary": ".served.flash_attn_rotary",
    "flash_attn.ops": ".served.flash_attn_rotary",
    "flash_attn.ops.triton": ".served.flash_attn_rotary",
    "flash_attn.ops.triton.rotary": ".served.flash_attn_rotary",
    "xformers": ".served.xformers",
    "xformers.ops": ".served.xformers_ops",
    "xformers.ops.fmha": ".served.xformers_ops",
    "xformers.ops.fmha.attn_bias": ".served.xformers_ops",
    "apex": ".served.apex",
    "apex.amp": ".served.apex_amp",
    "apex.optimizers": ".served.apex_optimizers",
    "apex.normalization": ".served.apex_normalization",
    "apex.parallel": ".served.apex_parallel",
}

# The served packages, and what to use instead of their other modules.
PACKAGES = {
    "torch_npu": "its fused operators and torch.npu are served on the virtual NPU; "
                 "torch_npu's other modules need Ascend's torch_npu",
    "flash_attn": "use flash_attn.flash_attn_func and its varlen, packed and kvcache "
                  "variants, flash_attn.layers.rotary, or "
                  "torch.nn.functional.scaled_dot_product_attention",
    "xformers": "use xformers.ops.memory_efficient_attention, or "
                "torch.nn.functional.scaled_dot_product_attention",
    "apex": "use apex.amp, apex.optimizers, apex.normalization and apex.parallel, or torch.amp, "
            "torch.optim, torch.nn.LayerNorm/RMSNorm and DistributedDataParallel",
}

# The compiled CUDA extensions (their modules, some of which code imports
# directly) are _cuda_only's: when the one imported is not installed, the
# import fails saying what to use instead.
EXTENSIONS = _cuda_only.EXTENSIONS

_PACKAGE = __name__.rpartition(".")[0]

# The names this process served: name -> module (disable() takes them out).
_served = {}


class _Alias:
    """Loader of a served name: the module it names, kept as it is (its own
    name and spec), under a second name."""

    def __init__(self, name, module_name):
        self.name = name
        self.module_name = module_name
        self.spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.module_name, _PACKAGE)
        self.spec = module.__spec__
        return module

    def exec_module(self, module):
        # Run already; the import system gave it the second name's spec.
        module.__spec__ = self.spec
        _served[self.name] = module


def _yields(top, backend):
    """Whether an installed package of that name is used instead: any
    torch_npu; an apex on Ascend's backend (Ascend's port of it), or one
    that is not NVIDIA's (PyPI's "apex" is another project)."""
    if top not in ("torch_npu", "apex"):
        return False
    spec = importlib.machinery.PathFinder.find_spec(top)
    if spec is None or top == "torch_npu" or backend == "torch_npu":
        return spec is not None
    return not any(os.path.isdir(os.path.join(place, "amp"))
                   for place in spec.submodule_search_locations or ())


def _offered(top, backend):
    """Whether the backend serves the package: the host's reference run
    (the cpu backend) has no npu to present as torch_npu."""
    return not (top == "torch_npu" and backend == "cpu")


def find_spec(name, backend):
    """The spec of a served name, None for one not served, or
    ModuleNotFoundError naming what to use instead."""
    top = name.partition(".")[0]
    if top in EXTENSIONS and importlib.machinery.PathFinder.find_spec(top) is None:
        package = EXTENSIONS[top]
        use = PACKAGES.get(package) or f"use {_cuda_only.PACKAGES[package][1]}"
        raise ModuleNotFoundError(
            f"{name} is a CUDA extension of {package}, with no NPU counterpart: {use}",
            name=name)
    if top not in PACKAGES:
        return None  # an extension installed
    if not _offered(top, backend):
        return None
    if name == top:
        if _yields(top, backend):
            return None
    elif sys.modules.get(top) is not _served.get(top):
        return None  # a package of that name that is not ours
    module_name = MODULES.get(name)
    if module_name is None and name.startswith("torch_npu.npu."):
        module_name = "torch.npu." + name[len("torch_npu.npu."):]
    if module_name is None:
        raise ModuleNotFoundError(
            f"{name} has no NPU counterpart under transfer_to_npu: {PACKAGES[top]}",
            name=name)
    return importlib.machinery.ModuleSpec(name, _Alias(name, module_name))


class _Distribution(importlib.metadata.Distribution):
    """A served package's metadata: its name and the version of the
    interface served."""

    def __init__(self, name):
        self.served = name

    def read_text(self, filename):
        if filename == "top_level.txt":  # packages_distributions()
            return self.served + "\n"
        if filename != "METADATA":
            return None
        version = importlib.import_module(MODULES[self.served], _PACKAGE).__version__
        return (f"Metadata-Version: 2.1\nName: {self.served}\nVersion: {version}\n"
                f"Summary: served on the NPU by {_PACKAGE}\n")

    def locate_file(self, path):
        return os.path.join(os.path.dirname(__file__), "served", str(path))


def _normalized(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def _serving():
    """The packages served now: all while migrating, torch_npu alone while
    rehearsing converted code (torch_npu as it is: the CUDA-only packages
    are not on an Ascend machine), none otherwise."""
    if _C.is_enabled():
        return PACKAGES
    return _REHEARSED if sys.modules[_PACKAGE].rehearsing else ()


_REHEARSED = ("torch_npu",)


class Finder:
    """The finder of the served names, first on sys.meta_path while
    migrating or rehearsing."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        top = name.partition(".")[0]
        if top not in PACKAGES and top not in EXTENSIONS:
            return None
        serving = _serving()
        if top not in serving and (serving is not PACKAGES or top not in EXTENSIONS):
            return None
        return find_spec(name, backends.installed)

    @staticmethod
    def find_distributions(context=importlib.metadata.DistributionFinder.Context()):
        """The served packages' distributions (those named by context),
        but for a package an installed one is used in place of."""
        wanted = None if context.name is None else _normalized(context.name)
        return [_Distribution(top) for top in _serving()
                if wanted in (None, top) and _offered(top, backends.installed)
                and not _yields(top, backends.installed)]


def submodule(package, name):
    """A served package's module reached as its attribute (``from apex
    import amp``; the import system looks for it under the served module's
    own name otherwise)."""
    full = f"{package}.{name}"
    if full in MODULES:
        return importlib.import_module(full)
    raise AttributeError(f"module {package!r} (served on the NPU) has no attribute {name!r}: "
                         f"{PACKAGES[package.partition('.')[0]]}")


def forget(keep=()):
    """Take the names served out of sys.modules (disable()), but for those
    of the packages in keep."""
    for name, module in list(_served.items()):
        if name.partition(".")[0] in keep:
            continue
        if sys.modules.get(name) is module:
            del sys.modules[name]
        del _served[name]
