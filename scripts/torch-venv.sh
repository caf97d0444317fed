#!/usr/bin/env bash
# A venv of its own for one torch line: scripts/torch-venv.sh LINE DIR
# (LINE such as 2.1).  The torch version is the one torch_npu's release for
# that line requires (its surface file says which), from PyPI: a CUDA build,
# some 3 GB with its nvidia packages, which runs without a GPU.  A venv
# that already has that torch is kept as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
LINE=$1
DIR=$2
PYTHON=${PYTHON:-python3}

surface=python/transfer_to_npu/surfaces/torch_npu-$LINE.json
if [ -f "$surface" ]; then
    version=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["torch"])' "$surface")
else
    version="$LINE.*"
fi
if [ -x "$DIR/bin/python" ] && "$DIR/bin/python" -c "
import sys, torch
sys.exit(not torch.__version__.split('+')[0].startswith('${version%.\*}'))" 2>/dev/null; then
    exit 0
fi
echo "torch-venv: $DIR with torch==$version"
"$PYTHON" -m venv "$DIR"
"$DIR/bin/python" -m pip install -q "torch==$version" pytest wheel "setuptools>=64"
