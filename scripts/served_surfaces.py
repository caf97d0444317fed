#!/usr/bin/env python3
"""Write what the packages served while migrating take, as their own
sources define it, for tests/test_call_shapes.py to check the served
modules against.

    python scripts/served_surfaces.py --package flash_attn 2.8.3 SRC \\
        --package xformers 0.0.35 SRC --package apex 25.05 SRC \\
        --package torch_npu 2.14.0 WHEEL [--out tests/data/served_surfaces.json]

SRC is a source tree that holds the package (a checkout, an unpacked
sdist) or a wheel; it is read with ``ast``, never imported (the packages
need CUDA, or Ascend's CANN).  For each module this package serves under
the package's names (``_served.MODULES``), the names the served module
defines are looked up in the real one, through its imports, with what a
call of each takes (a class's constructor and public methods; torch_npu's
operators from their op schemas, an overload each).
"""

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVED = ROOT / "python" / "transfer_to_npu" / "served"
OUT = ROOT / "tests" / "data" / "served_surfaces.json"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_npu_surface import Package, _entry  # noqa: E402


def served_modules():
    """{name served: this package's module that serves it}, as _served.py
    lists them (read, not imported)."""
    tree = ast.parse((SERVED.parent / "_served.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "MODULES" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit("_served.py: no MODULES")


def public_names(module):
    """The public names a served module binds (served/<name>.py)."""
    tree = ast.parse((SERVED / f"{module}.py").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return sorted(n for n in names if not n.startswith("_"))


def surface(top, package):
    out = {}
    for name, module in served_modules().items():
        if name.partition(".")[0] != top or not module.startswith(".served."):
            continue
        names, _ = package.namespace(name)
        entries = {}
        for public in public_names(module[len(".served."):]):
            entry = names.get(public)
            if entry is not None and entry[0] in ("function", "class"):
                entries[public] = _entry(entry)
            elif name == top and public in package.ops:
                entries[public] = ["op"] + package.ops[public]
        if entries:
            out[name] = dict(sorted(entries.items()))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--package", nargs=3, action="append", required=True,
                   metavar=("NAME", "VERSION", "SRC"))
    p.add_argument("--out", type=Path, default=OUT)
    opts = p.parse_args(argv)
    data = {}
    for top, version, src in opts.package:
        data[top] = {"version": version, "modules": surface(top, Package(src, top))}
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"{opts.out}: " + ", ".join(f"{t} {v}" for t, v, _ in opts.package))
    return 0


if __name__ == "__main__":
    sys.exit(main())
