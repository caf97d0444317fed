"""apex on the NPU (served as ``apex``): amp, optimizers, normalization
and parallel, each in its module."""

from .. import _served

__version__ = "0.1"  # the interface served
__path__ = []  # a package: its modules are served by name (_served.py)


def __getattr__(name):
    return _served.submodule("apex", name)
