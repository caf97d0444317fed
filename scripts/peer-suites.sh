#!/usr/bin/env bash
# Put the libraries' own test suites under build/peer-suites/NAME-VERSION/,
# for the version of NAME that $PYTHON has, where tests/test_peer_suites.py
# runs them on the CPU and migrated:
#
#   scripts/peer-suites.sh accelerate               its sdist's tests/ (PyPI)
#   scripts/peer-suites.sh litgpt                   its sdist's tests/ and package, of the
#                                                   release tests/test_converted_suites.py reads
#   scripts/peer-suites.sh lightning SOURCE         tests/tests_pytorch
#   scripts/peer-suites.sh transformers SOURCE      conftest.py, tests/, utils/test_module
#
# Lightning's and transformers' tests are not in their sdists: SOURCE is a
# git directory of the library's repository (a clone's .git, or a bare
# one), from which the tree of the version's tag is taken (Lightning:
# 2.6.6, transformers: v4.57.6), or of REF=<commit> where the tag is
# missing; or a tarball of the repository's tree at that version (GitHub's
# archive of the tag).  transformers' tests/*.py that its sdist has are
# then taken from the sdist (the release's own, whatever the tree's
# commit); its tests import the package from src/transformers, a link to
# the one installed; they import `datasets`, installed here with torch and
# huggingface_hub held.  A suite already there is left as it is.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    [ -x "$ROOT/.venv/bin/python" ] && PYTHON=$ROOT/.venv/bin/python
fi
NAME=${1:-}
SOURCE=${2:-}
usage() {
    echo "usage: scripts/peer-suites.sh accelerate | litgpt |" \
         "{lightning|transformers} GIT_DIR_OR_TARBALL" >&2
    exit 2
}
case $NAME in
    accelerate) PACKAGE=accelerate TAG= PATHS=() RELEASE= ;;
    litgpt) PACKAGE=litgpt TAG= PATHS=() RELEASE=0.5.13 ;;
    lightning) PACKAGE=lightning TAG= PATHS=(tests/tests_pytorch) RELEASE= ;;
    transformers) PACKAGE=transformers TAG=v PATHS=(conftest.py tests utils/test_module) RELEASE= ;;
    *) usage ;;
esac
case $NAME in accelerate | litgpt) ;; *) [ -n "$SOURCE" ] || usage ;; esac

# The version installed (litgpt, whose source is converted, is not installed).
VERSION=${RELEASE:-$("$PYTHON" -c "import importlib.metadata as m; print(m.version('$PACKAGE'))")}
SUITE=$ROOT/build/peer-suites/$NAME-$VERSION
[ ! -d "$SUITE" ] || exit 0
WORK=$(mktemp -d)
trap 'rm -rf "$WORK" "$SUITE.partial"' EXIT
mkdir -p "$SUITE.partial"

sdist() {
    # The sdist of the version installed, unpacked in $WORK/sdist.
    "$PYTHON" -m pip download -q --no-deps --no-binary :all: -d "$WORK" "$PACKAGE==$VERSION" &&
        mkdir -p "$WORK/sdist" &&
        tar xzf "$WORK/$PACKAGE-$VERSION.tar.gz" -C "$WORK/sdist" --strip-components 1
}

if [ "$NAME" = accelerate ]; then
    sdist
    cp -r "$WORK/sdist/tests" "$SUITE.partial/"
elif [ "$NAME" = litgpt ]; then
    sdist
    cp -r "$WORK/sdist/tests" "$WORK/sdist/litgpt" "$SUITE.partial/"
elif [ -d "$SOURCE" ]; then
    REF=${REF:-$TAG$VERSION}
    if ! git --git-dir="$SOURCE" rev-parse -q --verify "$REF^{commit}" >/dev/null; then
        echo "peer-suites: $SOURCE has no $REF; give REF=<commit> (the nearest one)" >&2
        exit 1
    fi
    echo "peer-suites: $NAME $VERSION's tests from $REF ($(git --git-dir="$SOURCE" rev-parse "$REF^{commit}"))"
    git --git-dir="$SOURCE" archive "$REF" -- "${PATHS[@]}" | tar x -C "$SUITE.partial"
elif [ -f "$SOURCE" ]; then
    echo "peer-suites: $NAME $VERSION's tests from $SOURCE"
    tar xzf "$SOURCE" -C "$SUITE.partial" --strip-components 1 --wildcards --no-wildcards-match-slash \
        "${PATHS[@]/#/*/}"
else
    echo "peer-suites: $SOURCE is neither a git directory nor a tarball" >&2
    exit 1
fi

if [ "$NAME" = transformers ]; then
    if sdist; then
        cp "$WORK"/sdist/tests/*.py "$SUITE.partial/tests/"
    else
        echo "peer-suites: transformers' sdist not downloaded: tests/*.py are the tree's" >&2
    fi
    mkdir -p "$SUITE.partial/src"
    ln -s "$("$PYTHON" -c "import os, transformers; print(os.path.dirname(transformers.__file__))")" \
        "$SUITE.partial/src/transformers"
    if ! "$PYTHON" -c "import datasets" 2>/dev/null; then
        "$PYTHON" -c "
import importlib.metadata as m, torch
print('torch==' + torch.__version__.split('+')[0])
print('huggingface_hub==' + m.version('huggingface_hub'))" >"$WORK/held"
        echo "peer-suites: pip install datasets"
        "$PYTHON" -m pip install -q -c "$WORK/held" datasets
    fi
fi
mv "$SUITE.partial" "$SUITE"
echo "peer-suites: $SUITE"
