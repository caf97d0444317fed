#!/usr/bin/env bash
# Install what a stage of the Makefile needs, skipping what is already there:
#   venv   the Debian packages a venv of the system's python3 and the build
#          need: python3, python3-venv and python3-dev (for the system's
#          Python only), gcc, uthash-dev
#   demo   those, and into $PYTHON: setuptools and wheel (the build), torch,
#          numpy
#   test   demo's, check and pkg-config, and into $PYTHON: pytest,
#          safetensors, libcst, and the libraries tested (pinned;
#          LIBRARIES=newest: their newest releases)
#   tools  valgrind and clang (`make sanitize`, `make fuzz`, `make valgrind`)
set -euo pipefail

STAGE=${1:-test}
PYTHON=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}

APT_PACKAGES=(uthash-dev)
case $STAGE in
    venv | demo) ;;
    test) APT_PACKAGES+=(check pkg-config) ;;
    tools) APT_PACKAGES=(valgrind clang libclang-rt-14-dev) ;;
    *) echo "install-deps: unknown stage '$STAGE' (venv, demo, test or tools)" >&2; exit 2 ;;
esac
if [ "$STAGE" != tools ]; then
    command -v cc >/dev/null || command -v gcc >/dev/null || APT_PACKAGES+=(gcc)
    # The system's Python has its venv module (ensurepip) and its headers in
    # packages of their own; another Python (pyenv's, a venv's) has both.
    py=$(command -v python3 || true)
    if [ -z "$py" ] || dpkg -S "$(readlink -f "$py")" >/dev/null 2>&1; then
        APT_PACKAGES+=(python3 python3-venv python3-dev)
    fi
fi

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
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi
if [ "$STAGE" = venv ] || [ "$STAGE" = tools ]; then exit 0; fi

has() { "$PYTHON" -c "import $1" >/dev/null 2>&1; }
pip_install() {
    # A system Python (PEP 668) takes no packages from pip: say what to do.
    if "$PYTHON" -c "
import os, sys, sysconfig
sys.exit(sys.prefix != sys.base_prefix or not os.path.exists(
    os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))"; then
        echo "install-deps: $PYTHON is the system's Python, where pip installs nothing" \
             "(PEP 668); it needs $*: leave PYTHON unset to use the project venv (.venv)," \
             "or give a venv's python" >&2
        exit 1
    fi
    echo "install-deps: pip install $*"
    "$PYTHON" -m pip install -q "$@"
}

# The build (pip install --no-build-isolation): setuptools 64 or later, wheel.
"$PYTHON" -c "
import sys, setuptools, wheel
sys.exit(int(setuptools.__version__.split('.')[0]) < 64)" >/dev/null 2>&1 ||
    pip_install "setuptools>=64" wheel
# Never ask pip for plain "torch": that resolves to a CUDA build of several GB.
has torch || pip_install "torch==$TORCH_VERSION"
# numpy: torch warns at import without it.
has numpy || pip_install numpy
if [ "$STAGE" = demo ]; then exit 0; fi

has pytest || pip_install pytest
# libcst: `python -m transfer_to_npu convert` edits source on its syntax tree.
has libcst || pip_install libcst
# safetensors: the tests load checkpoints with it (a small wheel, no
# dependencies).
has safetensors || pip_install safetensors

# The libraries below are installed with torch held at the version this
# Python has, so that pip never replaces it (a venv of another torch line,
# `make test-torch`, keeps its own).
HELD=$(mktemp)
trap 'rm -f "$HELD"' EXIT
"$PYTHON" -c "import torch; print('torch==' + torch.__version__.split('+')[0])" >"$HELD"
# The libraries tested: Hugging Face's transformers, accelerate and peft
# (tiny configs made locally, nothing downloaded), Lightning's launcher and
# DeepSpeed's ZeRO on its own Ascend path; the versions tested, or with
# LIBRARIES=newest their newest releases (`make test-libraries`).
LIBS=(transformers==4.57.6 accelerate==1.15.0 peft==0.21.2 lightning==2.6.6 deepspeed==0.19.8)
if [ "${LIBRARIES:-pinned}" = newest ]; then
    pip_install -c "$HELD" --upgrade "${LIBS[@]%%==*}"
    exit 0
fi
# DeepSpeed is looked for, not imported (its import probes the accelerators).
"$PYTHON" -c "
import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in
             ('transformers', 'accelerate', 'peft', 'lightning', 'deepspeed')))" ||
    pip_install -c "$HELD" "${LIBS[@]}"

# accelerate's own test suite (tests/test_peer_suites.py): its tests are not
# in its wheel: those of the sdist of the accelerate installed are kept under
# build/peer-suites/ (scripts/peer-suites.sh, which also takes Lightning's
# and transformers' from their repositories), with parameterized, which
# they import.  Offline, the test that runs them skips.
has parameterized || pip_install parameterized
PYTHON=$PYTHON "$(dirname "$0")/peer-suites.sh" accelerate ||
    echo "install-deps: accelerate's tests not downloaded" >&2
# litgpt's package and tests (tests/test_converted_suites.py converts them
# and runs them as on torch_npu): a code base with CUDA guards, mocks of
# torch.cuda and Lightning accelerators.
PYTHON=$PYTHON "$(dirname "$0")/peer-suites.sh" litgpt ||
    echo "install-deps: litgpt's tests not downloaded" >&2
