#!/usr/bin/env bash
# Install what building and testing transfer_to_npu needs, skipping what is
# already there: Debian packages (check, uthash, pkg-config; valgrind and
# clang for `make sanitize` / `make fuzz`), PyTorch's CPU build, pytest,
# safetensors and libcst.
set -euo pipefail

PYTHON=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
APT_PACKAGES=(check uthash-dev pkg-config)
[ "${WITH_TOOLS:-0}" = 1 ] && APT_PACKAGES+=(valgrind clang libclang-rt-14-dev)

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; else
        echo "install-deps: need root to install ${missing[*]}" >&2; exit 1
    fi
    echo "install-deps: apt-get install ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Never ask pip for plain "torch": that resolves to a CUDA build of several GB.
if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
    echo "install-deps: pip install torch==$TORCH_VERSION"
    "$PYTHON" -m pip install -q "torch==$TORCH_VERSION"
fi
"$PYTHON" -c "import pytest" >/dev/null 2>&1 || "$PYTHON" -m pip install -q pytest

# The libraries below are installed with torch held at the version this
# Python has, so that pip never replaces it (a venv of another torch line,
# `make test-torch`, keeps its own).
HELD=$(mktemp)
trap 'rm -f "$HELD"' EXIT
"$PYTHON" -c "import torch; print('torch==' + torch.__version__.split('+')[0])" >"$HELD"
# libcst: `python -m transfer_to_npu convert` edits source on its syntax tree.
"$PYTHON" -c "import libcst" >/dev/null 2>&1 || "$PYTHON" -m pip install -q libcst
# transformers, accelerate and peft from PyPI: the tests run Hugging Face's
# libraries on the NPU (tiny configs made locally, nothing downloaded).  The
# versions tested.
HF_PACKAGES=(transformers==4.57.6 accelerate==1.15.0 peft==0.21.2)
if ! "$PYTHON" -c "import transformers, accelerate, peft" >/dev/null 2>&1; then
    echo "install-deps: pip install ${HF_PACKAGES[*]}"
    "$PYTHON" -m pip install -q -c "$HELD" "${HF_PACKAGES[@]}"
fi
# safetensors: the tests load checkpoints with it (a small wheel, no
# dependencies).
"$PYTHON" -c "import safetensors" >/dev/null 2>&1 || "$PYTHON" -m pip install -q safetensors

# lightning from PyPI: the tests run its launcher (Trainer(devices=2)) on the
# NPU.
if ! "$PYTHON" -c "import lightning" >/dev/null 2>&1; then
    echo "install-deps: pip install lightning==2.6.6"
    "$PYTHON" -m pip install -q -c "$HELD" lightning==2.6.6
fi

# DeepSpeed from PyPI: the tests run its ZeRO on the NPU, on its own Ascend
# path (its kernels are built when first used, and none are on the virtual
# NPU).  Looked for, not imported (its import probes the accelerators).
if ! "$PYTHON" -c "import importlib.util as u, sys; sys.exit(u.find_spec('deepspeed') is None)"; then
    echo "install-deps: pip install deepspeed==0.19.8"
    "$PYTHON" -m pip install -q -c "$HELD" deepspeed==0.19.8
fi
