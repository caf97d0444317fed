"""Build of the C core, transfer_to_npu._C (plain C, CPython API only).

Environment switches:
  TTN_SANITIZE=1   build with AddressSanitizer and UndefinedBehaviorSanitizer
  TTN_DEBUG=1      build without optimisation, with assertions
"""
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

SOURCES = [
    "src/module.c",
    "src/wrapper.c",
    "src/devargs.c",
    "src/device_ctor.c",
    "src/class_ctor.c",
    "src/patch.c",
    "src/host_alias.c",
    "src/npu_method.c",
    "src/lazy.c",
    "src/stamp.c",
    "src/host_call.c",
    "src/log.c",
    "src/environ.c",
    "src/import_hook.c",
    "src/rules_glue.c",
    # pure C, shared with the check unit tests
    "src/devspec.c",
    "src/table.c",
    "src/ptrmap.c",
    "src/json.c",
    "src/rules.c",
]

# Hidden visibility: the extension exports PyInit__C alone, and its own
# functions call each other directly, never through the dynamic linker.
extra_compile_args = ["-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                      "-Wno-unused-parameter", "-Wno-cast-function-type", "-fvisibility=hidden"]
extra_link_args = []
undef_macros = []
if os.environ.get("TTN_DEBUG"):
    extra_compile_args += ["-O0", "-g"]
    undef_macros.append("NDEBUG")
if os.environ.get("TTN_SANITIZE"):
    flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"]
    extra_compile_args += flags
    extra_link_args += flags

if sys.platform == "win32":
    extra_compile_args = []



class build_py_with_pth(build_py):
    """Also install transfer_to_npu.pth at the top of site-packages, where
    the interpreter reads it at start (TRANSFER_TO_NPU=1)."""

    PTH = "transfer_to_npu.pth"

    def run(self):
        super().run()
        self.copy_file(os.path.join("python", self.PTH), os.path.join(self.build_lib, self.PTH))

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, self.PTH)]


setup(
    cmdclass={"build_py": build_py_with_pth},
    ext_modules=[
        Extension(
            "transfer_to_npu._C",
            sources=SOURCES,
            include_dirs=["include", "src"],
            depends=[os.path.join("include", "ttn", h) for h in os.listdir("include/ttn")]
            + ["src/state.h"],
            extra_compile_args=extra_compile_args,
            extra_link_args=extra_link_args,
            undef_macros=undef_macros,
        )
    ],
)
