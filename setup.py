"""Build of the C core, transfer_to_npu._C (plain C, CPython API only).

Environment switches:
  TTN_SANITIZE=1   build with AddressSanitizer and UndefinedBehaviorSanitizer
  TTN_DEBUG=1      build without optimisation, with assertions
"""
import glob
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

# The extension's module and state, then a folder per part: the accuracy
# dump's statistics, the patcher, the virtual NPU, and the pure-C parts (no
# Python.h; unit tested with check, headers in include/ttn).
SOURCES = [
    "src/module.c",
    "src/accuracy/stats_glue.c",
    "src/patcher/class_ctor.c",
    "src/patcher/devargs.c",
    "src/patcher/device_ctor.c",
    "src/patcher/environ.c",
    "src/patcher/import_hook.c",
    "src/patcher/log.c",
    "src/patcher/patch.c",
    "src/patcher/rules_glue.c",
    "src/patcher/wrapper.c",
    "src/virtual/callbacks.c",
    "src/virtual/host_alias.c",
    "src/virtual/host_call.c",
    "src/virtual/npu_method.c",
    "src/pure/devspec.c",
    "src/pure/json.c",
    "src/pure/ptrmap.c",
    "src/pure/rules.c",
    "src/pure/stats.c",
    "src/pure/table.c",
]

# Hidden visibility: the extension exports PyInit__C alone, and its own
# functions call each other directly, never through the dynamic linker.
# A function used without its declaration is an error: each part sees the
# other's only through src/state.h.
extra_compile_args = ["-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                      "-Wno-unused-parameter", "-Wno-cast-function-type", "-fvisibility=hidden",
                      "-Werror=implicit-function-declaration"]
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

# Headers the build needs from the system, and the package that has each.
SYSTEM_HEADERS = {"uthash.h": ("uthash-dev", "uthash-devel")}


class build_ext_checked(build_ext):
    """Say which package to install when a system header is missing, once,
    before the compiler says it for every file."""

    def run(self):
        dirs = ["/usr/include", "/usr/local/include", sys.prefix + "/include"]
        for var in ("CPATH", "C_INCLUDE_PATH"):
            dirs += [d for d in os.environ.get(var, "").split(os.pathsep) if d]
        for header, (deb, rpm) in SYSTEM_HEADERS.items():
            if not any(os.path.exists(os.path.join(d, header)) for d in dirs):
                sys.exit(f"transfer_to_npu: the C header {header} is missing; install it:\n"
                         f"  Debian/Ubuntu:              apt-get install {deb}\n"
                         f"  openEuler/EulerOS/CentOS:   yum install {rpm}\n"
                         f"(or put its directory in CPATH)")
        super().run()


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
    cmdclass={"build_py": build_py_with_pth, "build_ext": build_ext_checked},
    ext_modules=[
        Extension(
            "transfer_to_npu._C",
            sources=SOURCES,
            include_dirs=["include", "src"],
            depends=glob.glob("include/ttn/*.h") + glob.glob("src/**/*.h", recursive=True),
            extra_compile_args=extra_compile_args,
            extra_link_args=extra_link_args,
            undef_macros=undef_macros,
        )
    ],
)
