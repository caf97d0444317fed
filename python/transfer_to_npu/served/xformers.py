"""xformers on the NPU (served as ``xformers``): its package; the
attention is in ``xformers.ops``."""

from .. import _served

__version__ = "0.0.35"  # the interface served
__path__ = []  # a package: its other modules are refused by name (_served.py)


def __getattr__(name):
    return _served.submodule("xformers", name)
