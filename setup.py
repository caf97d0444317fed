"""Build of the C core, transfer_to_npu._C (plain C, CPython API only).

Environment switches:
  TTN_SANITIZE=1   build with AddressSanitizer and UndefinedBehaviorSanitizer
  TTN_DEBUG=1      build without optimisation, with assertions
"""
import os
import sys

from setuptools import Extension, setup

SOURCES = [
    "src/module.c",
    "src/wrapper.c",
    "src/devargs.c",
    "src/device_ctor.c",
    "src/patch.c",
    "src/host_alias.c",
    "src/host_call.c",
    # pure C, shared with the check unit tests
    "src/devspec.c",
    "src/table.c",
]

extra_compile_args = ["-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                      "-Wno-unused-parameter", "-Wno-cast-function-type"]
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

setup(
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
