"""Patches of CUDA APIs follow the code they patch, across the tree.

A test patches what the code under test calls: ``mock.patch(
"litgpt.utils.torch.cuda.device_count")`` the calls of
``torch.cuda.device_count`` in litgpt/utils.py, ``monkeypatch.setattr(
torch.cuda, "is_available", ...)`` every call of it.  Converted, the patch
must name what that code calls then: ``torch.npu.device_count`` where the
code was converted, ``torch.cuda.device_count`` where it was left as
written (a test of the device that guards what does not convert, see
``meaning``).  The scan of a file marks its patch targets ``pending``; once
every file is scanned, ``Uses`` knows what the tree's code does with each
API and settles them:

* every use converted to the NPU's name: the patch names it too;
* every use left as written, or none in the tree (the patched module is a
  library's, which no conversion changes): the patch stays as written;
* uses of both kinds, or answered by the identity policy (a constant, which
  no patch reaches): a hand edit, naming where.
"""

import os

from .scan import ATTRIBUTE, CHANGE, PATCH, UNSUPPORTED, key


def module_names(rel):
    """The dotted names a file of the tree is imported by: its path inside
    the tree and each of its tails (``src/pkg/mod.py``: ``src.pkg.mod``,
    ``pkg.mod``, ``mod``)."""
    path = rel[:-3] if rel.endswith(".py") else rel
    parts = [p for p in path.replace(os.sep, "/").split("/") if p]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return [".".join(parts[i:]) for i in range(len(parts))]


class Uses:
    """What the code of a tree does with each API a patch may name: per
    module, and everywhere, whether its uses are renamed, answered or left
    as written (and where first); and the attributes its own code assigns."""

    def __init__(self):
        self.modules = {}       # module name -> {API: {status: "file:line"}}
        self.everywhere = {}    # API -> {status: "file:line"}
        # (module name, function name) -> {API: {status: "file:line"}}
        self.functions = {}
        self.defined = {}       # function name -> the modules that define one
        self.assigned = {}      # attribute -> {file: line}, of x.attribute = ...

    def add(self, path, rel, scanned):
        """The scan of the file at path (rel inside the tree)."""
        findings = scanned.findings
        for attr, line in scanned.stored_attrs.items():
            self.assigned.setdefault(attr, {})[path] = line
        names = module_names(rel)
        per_module = [self.modules.setdefault(name, {}) for name in names]
        functions = sorted((key(f), f.name) for f in scanned.functions if hasattr(f, "name"))
        for f in findings:
            if f.kind in ("patch_target", "arguments") or not f.api.startswith("torch."):
                continue
            if f.category == CHANGE:
                status = "answered" if f.kind == "identity" else "renamed"
            else:
                status = "left"
            where = f"{f.file}:{f.line}"
            self.everywhere.setdefault(f.api, {}).setdefault(status, where)
            for uses in per_module:
                uses.setdefault(f.api, {}).setdefault(status, where)
            inner = [name for k, name in functions if k[:2] <= (f.line, f.col) < k[2:]]
            if inner:
                self.defined.setdefault(inner[-1], set()).add(names[0])
                self.functions.setdefault((names[0], inner[-1]), {}).setdefault(
                    f.api, {}).setdefault(status, where)
                for name in names[1:]:
                    self.functions.setdefault((name, inner[-1]), {}).setdefault(
                        f.api, {}).setdefault(status, where)

    def settle(self, pending):
        """Settle the pending changes (Scan.pending); the ids of the
        findings dropped (what they change stays as written)."""
        dropped = set()
        for f, what, a, b in pending:
            if what == PATCH:
                self._patch(f, a, b, dropped)
            else:
                self._attribute(f, a, b, dropped)
        return dropped

    def _patch(self, f, module, target, dropped):
        api, exercised = target
        if module is None:
            found = self.everywhere.get(api, {})
        else:
            # A module outside the tree is a library's: its code is not
            # converted.
            found = self.modules.get(module, {}).get(api, {})
        if len(found) > 1:
            # The uses differ: those in the functions the code under the
            # patch calls decide, where it calls some.
            called = {}
            for name in exercised:
                for where_module in ([module] if module else self.defined.get(name, ())):
                    for status, where in self.functions.get((where_module, name), {}).get(
                            api, {}).items():
                        called.setdefault(status, where)
            found = called or found
        statuses = set(found)
        if not statuses or statuses == {"left"}:
            dropped.add(id(f))
        elif statuses != {"renamed"} or not f.edits:
            _hand_edit(f, api, found)

    def _attribute(self, f, root, attr, dropped):
        """x.is_cuda renamed x.is_npu, unless the tree's own classes have
        an attribute of that name (timm's PrefetchLoader.is_cuda): then
        self.is_cuda in their file is theirs, and x.is_cuda elsewhere may
        be, and stays (is_cuda is False on the npu: a test of it takes the
        path of a machine without a GPU)."""
        owners = self.assigned.get(attr)
        if not owners or f.category != CHANGE:
            return
        if root in ("self", "cls") and f.file in owners:
            dropped.add(id(f))
            return
        where = ", ".join(f"{path}:{line}" for path, line in sorted(owners.items())[:3])
        new = f.edits[0][3] if f.edits else attr
        f.category, f.kind = UNSUPPORTED, "hand_edit"
        f.result = (f"{attr} is also an attribute of this code's own objects ({where}): left "
                    f"as written")
        f.suggestion = f"write {new} where it is a tensor's"
        f.edits = []


def _hand_edit(f, api, found):
    ways = {"renamed": "converted", "answered": "answered by a constant",
            "left": "left as written"}
    where = "; ".join(f"{ways[s]} at {found[s]}" for s in ("renamed", "answered", "left")
                      if s in found)
    f.category, f.kind = UNSUPPORTED, "hand_edit"
    f.result = f"patches {api}, which the converted code uses otherwise ({where})"
    f.suggestion = "patch what the code the test exercises calls once converted"
    f.edits = []
