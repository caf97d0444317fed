#!/usr/bin/env python3
"""Write the API surface of each torch_npu release line as data.

    python scripts/torch_npu_surface.py [LINE ...] [--wheels DIR] [--out DIR]

For each line (2.1, 2.3, ... 2.14; by default every line pip finds), the
newest release of the line is downloaded (``pip download --no-deps``) and
its Python sources are read with ``ast``, never imported (torch_npu needs
Ascend's CANN libraries).  What is written, one JSON file per line, are the
names the mapping table depends on: those of ``torch_npu.npu`` and of its
submodules that torch.cuda has too, of ``torch_npu.profiler`` and
``torch_npu.distributed``, each with its kind (function, class, module,
object; ``extension`` for a name ``__all__`` declares that torch_npu's C
extension defines) and, for a function or a class, its parameters as
written (a class's: what a call of it takes, and its public methods'), for
the table to take a CUDA call's arguments as torch_npu's function takes
them; and torch_npu's operators (``torch_npu.npu_fusion_attention``...),
kind ``op``, which its C extension defines from the op schemas its wheel
ships (``torch_npu/csrc/aten/*.yaml``).  ``Package`` reads other packages'
sources too (scripts/served_surfaces.py).
"""

import argparse
import ast
import copy
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "python" / "transfer_to_npu" / "surfaces"

# The modules recorded.  torch.npu is torch_npu.npu; its submodules are
# those whose names torch.cuda's submodules share.
MODULES = ("torch_npu.npu", "torch_npu.npu.amp", "torch_npu.npu.graphs", "torch_npu.npu.memory",
           "torch_npu.npu.random", "torch_npu.npu.streams", "torch_npu.profiler",
           "torch_npu.distributed")


# --- reading a wheel ---------------------------------------------------------

class Package:
    """The Python sources of a package, by module name, and its operators:
    from a wheel, or from a directory that holds the package ``top`` (a
    source tree)."""

    def __init__(self, wheel, top="torch_npu"):
        self.top = top
        self.sources, self.packages, self.ops = {}, set(), {}
        for name, read in _files(wheel):
            if name.startswith(f"{top}/csrc/aten/") and name.endswith(".yaml"):
                for op, signatures in _ops(read()).items():
                    known = self.ops.setdefault(op, [])
                    known += [s for s in signatures if s not in known]
            if not name.endswith(".py") or not name.startswith(f"{top}/"):
                continue
            parts = name[:-3].split("/")
            if parts[-1] == "__init__":
                parts.pop()
                self.packages.add(".".join(parts))
            self.sources[".".join(parts)] = read()
        self._namespaces, self._reading = {}, {}

    def is_module(self, name):
        return name in self.sources

    def submodules(self, name):
        prefix = name + "."
        return sorted(m[len(prefix):] for m in self.sources
                      if m.startswith(prefix) and "." not in m[len(prefix):])

    def namespace(self, name):
        """{name: entry} of what the module's top level binds, and its
        ``__all__`` (None when it has none)."""
        if name in self._namespaces:
            return self._namespaces[name]
        if name in self._reading:
            # An import cycle: what the module has bound so far, as Python
            # itself would find it.
            reader = self._reading[name]
            return reader.names, reader.all
        if name not in self.sources:
            return {}, None
        reader = self._reading[name] = _Reader(self, name)
        try:
            found = reader.read(ast.parse(self.sources[name]).body)
        finally:
            del self._reading[name]
        self._namespaces[name] = found
        return found


def _files(path):
    """(name relative to the package's parent, a reader of its text) of
    each file of a wheel or a directory."""
    def text(data):
        return data.decode("utf-8", "replace")

    if os.path.isdir(path):
        for where, _, names in os.walk(path):
            for name in names:
                full = os.path.join(where, name)
                yield (os.path.relpath(full, path).replace(os.sep, "/"),
                       lambda full=full: text(Path(full).read_bytes()))
        return
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            yield name, lambda name=name: text(z.read(name))


_SCHEMA = re.compile(r"^\s*-?\s*func:\s*(npu_\w+)(\.\w+)?\((.*)\)\s*->", re.M)


def _ops(schemas):
    """{operator: [its parameters as Python takes them]} of the public
    operators an op-schema file declares: torch_npu's own (npu_*), which
    the package exposes as its attributes, an overload a signature each.
    The out= overload is the keyword ``out`` of the operator's own."""
    found, outs = {}, set()
    for m in _SCHEMA.finditer(schemas):
        name, overload, params = m.groups()
        if overload == ".out":
            outs.add(name)
        else:
            found.setdefault(name, []).append((overload, _python_params(params)))
    return {name: [_with_out(text) if name in outs and overload is None else text
                   for overload, text in overloads]
            for name, overloads in found.items()}


def _with_out(text):
    if text == "()":
        return "(*, out=None)"
    return text[:-1] + (", out=None)" if "*" in text else ", *, out=None)")


def _python_params(schema):
    """A schema's arguments as Python's binding of the operator takes them:
    "Tensor self, int dim=-1, *, bool flag=False" -> "(input, dim=-1, *,
    flag=False)" (torch's bindings name a function's self ``input``)."""
    out = []
    for arg in _split(schema):
        if arg == "*":
            out.append("*")
            continue
        declared, _, default = arg.partition("=")
        name = declared.split()[-1]
        name = "input" if name == "self" else name
        if default:
            default = default.strip()
            try:
                ast.literal_eval(default)
            except (ValueError, SyntaxError):
                default = repr(default)  # a default the schema writes its own way (Mean)
            out.append(f"{name}={default}")
        else:
            out.append(name)
    return "(" + ", ".join(out) + ")"


def _split(text):
    """Comma-separated items, commas inside brackets kept."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(text + ","):
        depth += c in "([" and 1 or c in ")]" and -1 or 0
        if c == "," and depth == 0:
            if text[start:i].strip():
                items.append(text[start:i].strip())
            start = i + 1
    return items


def _params(args, skip=0):
    """[the parameters as written, annotations left out]: "(device=None,
    *, flag=False)"; ``skip`` leaves out a method's self or cls."""
    args = copy.deepcopy(args)
    drop = min(skip, len(args.posonlyargs))
    args.posonlyargs = args.posonlyargs[drop:]
    args.args = args.args[skip - drop:]
    for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
        if a is not None:
            a.annotation = None
    kept = len(args.posonlyargs) + len(args.args)
    args.defaults = args.defaults[max(len(args.defaults) - kept, 0):]
    return ["(" + ast.unparse(args) + ")"]


def _strings(node):
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e.value for e in node.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


class _Reader:
    """A module's top level, statement by statement (both branches of an if
    or a try: either may be the one that runs)."""

    def __init__(self, package, module):
        self.package, self.module = package, module
        self.names, self.all = {}, None
        self.is_package = module in package.packages

    def read(self, body):
        self._block(body)
        return self.names, self.all

    def _block(self, body):
        for node in body:
            self._statement(node)

    def _absolute(self, node):
        if not node.level:
            return node.module or ""
        base = self.module.split(".")
        if not self.is_package:
            base.pop()
        base = base[:len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def _lookup(self, module, name):
        """The entry of `name` imported from `module`."""
        if self.package.is_module(f"{module}.{name}"):
            return ["module"]
        if module == f"{self.package.top}._C" or module.startswith(f"{self.package.top}._C."):
            return ["extension"]
        if self.package.is_module(module):
            names, declared = self.package.namespace(module)
            if name in names:
                return names[name]
            if declared and name in declared:
                return ["extension"]
            return ["object"]
        return ["imported", f"{module}.{name}"]

    def _class(self, node):
        """["class", what a call of it takes, {public method: what a call
        of it takes}]: the class's own, or those of its first base of
        ours."""
        methods = {n.name: n for n in node.body
                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        inherited = ["class", None, {}]
        for base in node.bases:
            entry = self._value(base)
            if entry and entry[0] == "class":
                inherited = entry
                break
        made = next((_params(methods[n].args, skip=1)[0] for n in ("__init__", "__new__")
                     if n in methods), inherited[1])
        own = {}
        for name, method in methods.items():
            if name.startswith("_"):
                continue
            decorators = {ast.unparse(d) for d in method.decorator_list}
            if "property" in decorators or any(d.endswith(".setter") for d in decorators):
                continue
            own[name] = _params(method.args, skip=0 if "staticmethod" in decorators else 1)[0]
        return ["class", made, {**inherited[2], **own}]

    def _value(self, node):
        """The entry an assigned value makes, when it can be told."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Attribute):
            parts = []
            while isinstance(node, ast.Attribute):
                parts.insert(0, node.attr)
                node = node.value
            if isinstance(node, ast.Name):
                base = self.names.get(node.id)
                if base and base[0] == "module" and len(base) > 1 and len(parts) == 1:
                    return self._lookup(base[1], parts[0])
            return None
        if isinstance(node, ast.Lambda):
            return ["function"] + _params(node.args)
        return None

    def _bind(self, target, entry):
        if isinstance(target, ast.Name):
            self.names[target.id] = entry
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._bind(t, ["object"])

    def _statement(self, node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.names[node.name] = ["function"] + _params(node.args)
            if node.name == "__getattr__":
                # Names a module __getattr__ serves (compared to its argument).
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Compare):
                        for c in [sub.left] + sub.comparators:
                            values = _strings(c) or (
                                [c.value] if isinstance(c, ast.Constant)
                                and isinstance(c.value, str) else [])
                            for v in values:
                                self.names.setdefault(v, self._lookup(self.module, v)
                                                      if self.package.is_module(
                                                          f"{self.module}.{v}") else ["object"])
        elif isinstance(node, ast.ClassDef):
            self.names[node.name] = self._class(node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.names[alias.asname] = ["module", alias.name]
                else:
                    top = alias.name.partition(".")[0]
                    self.names[top] = ["module", top]
        elif isinstance(node, ast.ImportFrom):
            module = self._absolute(node)
            for alias in node.names:
                if alias.name == "*":
                    names, declared = self.package.namespace(module)
                    public = declared if declared is not None else [
                        n for n in names if not n.startswith("_")]
                    for n in public:
                        self.names[n] = names.get(n, ["extension"])
                    continue
                entry = self._lookup(module, alias.name)
                if entry == ["module"]:
                    entry = ["module", f"{module}.{alias.name}"]
                self.names[alias.asname or alias.name] = entry
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "__all__":
                    self.all = _strings(node.value) or self.all
                elif node.value is not None:
                    self._bind(target, self._value(node.value) or ["object"])
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name) and node.target.id == "__all__":
                self.all = (self.all or []) + (_strings(node.value) or [])
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value  # __all__.extend([...]) / __all__.append("x")
            f = call.func
            if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                    and f.value.id == "__all__" and call.args):
                if f.attr == "extend":
                    self.all = (self.all or []) + (_strings(call.args[0]) or [])
                elif f.attr == "append" and isinstance(call.args[0], ast.Constant):
                    self.all = (self.all or []) + [call.args[0].value]
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.names.pop(target.id, None)
        elif isinstance(node, ast.If):
            self._block(node.body)
            self._block(node.orelse)
        elif isinstance(node, ast.Try):
            self._block(node.body)
            for handler in node.handlers:
                self._block(handler.body)
            self._block(node.orelse)
            self._block(node.finalbody)
        elif isinstance(node, ast.With):
            self._block(node.body)


# --- the surface -------------------------------------------------------------

def _entry(entry):
    """What the file keeps of an entry: the kind, and a function's or a
    class's parameters as written ("(device=None)"; null when unknown), a
    class's public methods and theirs."""
    kind = entry[0]
    if kind == "function":
        return entry[:2]
    if kind == "class":
        return entry[:3] if entry[2] else entry[:2]
    if kind == "imported":
        return entry[:2]
    return [kind]


def surface(package):
    modules = {}
    for name in MODULES:
        if not package.is_module(name):
            continue
        names, declared = package.namespace(name)
        table = {n: _entry(e) for n, e in names.items()
                 if not (n.startswith("__") and n.endswith("__"))}
        for n in declared or ():
            table.setdefault(n, ["extension"])
        if name in package.packages:
            for sub in package.submodules(name):
                table.setdefault(sub, ["module"])
        for n, e in table.items():
            if e[0] == "module" and len(e) > 1:
                e[:] = ["module"]
        modules[name] = {"__all__": declared, "names": dict(sorted(table.items()))}
    modules["torch_npu"] = {"__all__": None, "names": {op: ["op"] for op in sorted(package.ops)}}
    return modules


def _requires_torch(wheel):
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        for line in z.read(meta).decode().splitlines():
            m = re.match(r"Requires-Dist:\s*torch\s*\(?\s*==\s*([0-9.]+)", line)
            if m:
                return m.group(1).rstrip(".")
    return None


def write(path, version, torch_version, modules):
    """JSON with one name a line, so that a new release's diff reads as the
    names it adds and drops."""
    lines = ["{", f' "torch_npu": {json.dumps(version)},', f' "torch": {json.dumps(torch_version)},',
             ' "modules": {']
    for i, (name, module) in enumerate(modules.items()):
        lines.append(f'  {json.dumps(name)}: {{')
        lines.append(f'   "__all__": {json.dumps(module["__all__"])},')
        lines.append('   "names": {')
        items = list(module["names"].items())
        for j, (n, e) in enumerate(items):
            lines.append(f'    {json.dumps(n)}: {json.dumps(e)}' + ("," if j < len(items) - 1 else ""))
        lines.append("   }")
        lines.append("  }" + ("," if i < len(modules) - 1 else ""))
    lines += [" }", "}", ""]
    path.write_text("\n".join(lines))


# --- downloading -------------------------------------------------------------

def _lines():
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "torch-npu"],
                         capture_output=True, text=True, check=True).stdout
    versions = re.search(r"Available versions: (.*)", out).group(1).split(", ")
    return sorted({".".join(v.split(".")[:2]) for v in versions},
                  key=lambda v: tuple(int(p) for p in v.split(".")))


def _download(line, wheels):
    """The newest release of the line (pip picks it), as a wheel in
    `wheels`."""
    before = set(wheels.glob("torch_npu-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary=:all:", f"torch-npu=={line}.*", "-d", str(wheels)], check=True)
    prefix = f"torch_npu-{line}."
    found = [w for w in wheels.glob(prefix + "*.whl") if w not in before] or [
        w for w in wheels.glob(prefix + "*.whl")]
    return max(found, key=lambda w: _version_key(w.name.split("-")[1]))


def _version_key(version):
    m = re.match(r"(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?", version)
    return tuple(int(g or -1) for g in m.groups())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("lines", nargs="*", help="release lines (2.1 2.5 ...); default: all")
    p.add_argument("--wheels", type=Path, default=ROOT / "build" / "torch_npu_wheels",
                   help="where the wheels are downloaded (kept, reused)")
    p.add_argument("--out", type=Path, default=OUT, help="where the surface files go")
    opts = p.parse_args(argv)
    opts.wheels.mkdir(parents=True, exist_ok=True)
    opts.out.mkdir(parents=True, exist_ok=True)
    for line in opts.lines or _lines():
        wheel = _download(line, opts.wheels)
        version = wheel.name.split("-")[1]
        path = opts.out / f"torch_npu-{line}.json"
        write(path, version, _requires_torch(wheel), surface(Package(wheel)))
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
