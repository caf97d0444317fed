"""What the mapping table's rows mean in source code.

The static tools (``analyze``, ``convert``) read the same table as the
runtime: ``table_rows()`` is their one way to it.  ``Spellings`` reads each
row, with the torch that derived it, for what can be seen in source:

* a name that becomes another (``torch.cuda.synchronize`` ->
  ``torch.npu.synchronize``, ``x.cuda()`` -> ``x.npu()``, ``x.is_cuda`` ->
  ``x.is_npu``), and so which modules become which (``torch.cuda`` ->
  ``torch.npu``, for imports);
* the arguments that take a device (position and keywords, as the row's
  wrapper finds them) or a process-group backend;
* a default device that is CUDA's (``torch.amp.GradScaler()``), a keyword
  spelling CUDA (``profile(use_cuda=True)``), a call that becomes another
  (``is_nccl_available()``);
* what has no NPU counterpart (the reason is the row's), and what only the
  runtime can map (a target outside torch).

Nothing here lists APIs: a row's ``pos`` and ``kws`` say where its device
goes, its mode says what kind of change it is.  Device and backend strings
are judged by the C core's parser (``_C.npu_device_string``,
``_C.hccl_backend_string``), as the wrappers judge them at run time.
"""

import ast
import sys
import warnings

from .. import _C

# The keyword a backend row's process-group functions take their backend by
# (the C core's backend rows read it by that name too).
BACKEND_KEYWORD = "backend"

# The C core's constructor rule (torch.device) takes the type first, or by
# this keyword.
_CONSTRUCTOR_KEYWORD = "type"


def table_rows(torch_npu=None):
    """The mapping table's rows, as the runtime derives them from the torch
    that is installed, with the NPU backend the runtime would pick (the
    virtual NPU without torch_npu), or, given a torch_npu release line, as
    that release would get them (its names, from ``surfaces/``).  The
    user's rules file (TRANSFER_TO_NPU_RULES) is not read: its rules name
    the user's own modules, which the static tools never import."""
    import transfer_to_npu as package

    from .. import _rules, backends, surfaces

    torch = package._import_torch()
    release = surfaces.load(torch_npu) if torch_npu is not None else None
    backends.install()
    # Derived from torch as it is: with migration on, what the rows read
    # (a default argument, a module's names) would be the migrated one.
    enabled = _C.is_enabled()
    if enabled:
        package.disable()
    try:
        rows, _ = _rules.derive(torch) if release is None else \
            _rules.derive(torch, release[1], release[0])
    finally:
        if enabled:
            package.enable()
    return rows


# Device and backend strings are ASCII: any other string is neither (and
# one holding a lone surrogate could not even be handed to the parser).

def npu_device(text):
    """The NPU spelling of a CUDA device string ('cuda:1' -> 'npu:1'), None
    for any other string; ValueError for a malformed CUDA one."""
    return _C.npu_device_string(text) if text.isascii() else None


def hccl_backend(text):
    """A process-group backend string with NCCL made HCCL, or None."""
    return _C.hccl_backend_string(text) if text.isascii() else None


def is_path(text):
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def _original(obj):
    """What a migration wrapper wraps (torch's own object), else obj."""
    if isinstance(obj, (_C.FunctionWrapper, _C.MethodWrapper)):
        return obj.__wrapped__
    return obj


def resolve(path):
    """The object a dotted path names in torch (or torch_npu) as imported
    now, or None.  Nothing is imported: the modules the rows are about are
    (deriving them imported them), and the user's code never is."""
    parts = path.split(".")
    if parts[0] not in ("torch", "torch_npu"):
        return None
    obj = sys.modules.get(parts[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.has_cuda and its like warn when read
        for i, part in enumerate(parts[1:], 2):
            if obj is None:
                return None
            try:
                obj = getattr(obj, part)
            except AttributeError:
                obj = sys.modules.get(".".join(parts[:i]))
            except Exception:  # a lazy attribute that fails to load names nothing
                return None
    return obj


class Meaning:
    """What one spelling (a dotted name, or a method or attribute name on
    any object) means: the union of the rows about it."""

    __slots__ = ("source", "kind", "member", "rename", "device_pos", "device_kws",
                 "backend_pos", "unsupported", "runtime", "default", "keyword_swap", "call",
                 "legacy")

    def __init__(self, source, kind, member=False):
        self.source = source
        self.kind = kind
        self.member = member            # a method or attribute, read from its class
        self.rename = None              # the target name
        self.device_pos = set()         # positions (as the caller writes them) of a device
        self.device_kws = set()         # keywords that take a device
        self.backend_pos = None         # position of a process-group backend, -1: keyword only
        self.unsupported = None         # why it has no NPU counterpart
        self.runtime = None             # what only the runtime maps it to
        self.default = None             # (parameter, position, npu value) of a CUDA default
        self.keyword_swap = None        # (keyword, value, [(keyword, value text)...])
        self.call = None                # (attribute, arguments' text) of the call it becomes
        self.legacy = None              # (pattern of a CUDA type string, what it becomes)

    def takes_device(self):
        return bool(self.device_pos or self.device_kws)


class Spellings:
    """The rows of the mapping table, read for their source spellings."""

    def __init__(self, rows, fused=None):
        from .advice import fused_names

        # The torch_npu names the target has, for the advice on its fused
        # operators: by default the served torch_npu's.
        self.fused = fused_names(rows) if fused is None else fused
        self.names = {}       # dotted name -> Meaning
        self.members = {}     # method or attribute name -> Meaning
        self.modules = {}     # module -> the module its names map into
        self.device_names = set()
        self.backend_names = {BACKEND_KEYWORD}
        self._by_id = {}      # id(object) -> Meaning, for other paths to the same object
        self._held = []       # the objects of _by_id, so that their ids stay theirs
        self._resolved = {}
        for r in rows:
            self._add(r)
        self._derive_modules()

    # --- reading rows ---------------------------------------------------

    def _meaning(self, source, kind, mode):
        parent_path, _, attr = source.rpartition(".")
        parent = resolve(parent_path) if parent_path else None
        if isinstance(parent, type):
            obj = getattr(parent, attr, None)
            if mode == _C.MODE_ATTRIBUTE or (callable(obj) and not isinstance(obj, type)):
                # A method or attribute is reached on any object (x.cuda()),
                # whatever its class: one meaning per name, for all classes.
                m = self.members.get(attr)
                if m is None:
                    m = self.members[attr] = Meaning(source, kind, member=True)
                self.names.setdefault(source, m)
                return m
        m = self.names.get(source)
        if m is None:
            m = self.names[source] = Meaning(source, kind)
            obj = resolve(source)
            if obj is not None:
                obj = _original(obj)
                if not isinstance(obj, (str, int, float, bool, tuple)):
                    self._by_id.setdefault(id(obj), m)
                    self._held.append(obj)
        return m

    def _add(self, r):
        source, target, kind, mode, owner, name, target_obj, pos, binds, kws = r[:10]
        # The scan finds CUDA extensions itself, with their kernels; a hook
        # for torch's own use is no spelling.
        if mode == _C.MODE_ARG_REPLACE or kind == "cuda_extension" or \
                (mode == _C.MODE_HOOK and not _spells_cuda(source)):
            return
        self.device_names.update(kws)
        if kind == "default":
            self._add_default(source, owner, target_obj)
            return
        if not is_path(source):
            if "(" in source and _spells_cuda(source):
                self._add_pattern(source, target, kind, mode)
            return
        m = self._meaning(source, kind, mode)
        # Positions as the caller writes them: the wrapped callable of a
        # method or constructor receives self (or cls) first.
        offset = 1 if (binds or name == "__new__") else 0
        user_pos = pos - offset if pos >= offset else -1
        if mode == _C.MODE_UNSUPPORTED:
            m.unsupported = target
            return
        # What a row makes of a name that does not spell CUDA
        # (set_float32_matmul_precision also setting Ascend's HF32) is the
        # runtime's business: code written so is already the NPU's.
        if mode in (_C.MODE_REDIRECT, _C.MODE_REPLACE, _C.MODE_ATTRIBUTE) and \
                target != source and _spells_cuda(source):
            if is_path(target):
                if target.split(".")[0] == source.split(".")[0]:
                    m.rename = target
                else:
                    m.runtime = f"mapped at run time to {target}"
            else:
                call = _call_of(target)
                if call is not None and call[0].rpartition(".")[0] == source.rpartition(".")[0]:
                    m.call = (call[0].rpartition(".")[2], call[1])
                else:
                    m.runtime = (f"no NPU spelling of it: migrated at run time, it answers "
                                 f"{target}")
        if mode in (_C.MODE_DEVICE_ARG, _C.MODE_CLASS_DEVICE, _C.MODE_REDIRECT):
            if user_pos >= 0:
                m.device_pos.add(user_pos)
            m.device_kws.update(kws)
        elif mode == _C.MODE_CONSTRUCTOR:
            m.device_pos.add(0)
            m.device_kws.add(_CONSTRUCTOR_KEYWORD)
        elif mode == _C.MODE_BACKEND:
            m.backend_pos = user_pos
            m.device_kws.update(kws)

    def _add_default(self, source, function, new_defaults):
        """A row that makes a CUDA default the npu's: the parameter whose
        default is a CUDA device, found in the function the row changes."""
        callee = source.partition("(")[0]
        code = getattr(function, "__code__", None)
        defaults = getattr(function, "__defaults__", None)
        if not is_path(callee) or code is None or not defaults or \
                not isinstance(new_defaults, tuple) or len(new_defaults) != len(defaults):
            return
        params = code.co_varnames[:code.co_argcount]
        first = len(params) - len(defaults)
        for i, new in enumerate(new_defaults):
            # The default the row makes the NPU spelling of a CUDA device
            # (the function's own may already be it, migration being on).
            if isinstance(new, str) and new.startswith("npu") and \
                    _device_or_none("cuda" + new[3:]) == new:
                param = params[first + i]
                position = first + i - (1 if function.__name__ == "__init__" else 0)
                m = self._meaning(callee, "default", _C.MODE_REPLACE)
                m.default = (param, position, new_defaults[i])
                return

    def _add_pattern(self, source, target, kind, mode):
        """A row whose source is a call pattern: ``f(kw=value)`` (with a
        target ``f(kw2=value2)``: the keyword is swapped), or ``f('...<T>...')``
        (a CUDA type string: what it becomes is the row's target)."""
        try:
            call = ast.parse(source, mode="eval").body
        except SyntaxError:
            return
        if not isinstance(call, ast.Call) or not is_path(_dotted(call.func) or ""):
            return
        m = self._meaning(_dotted(call.func), kind, mode)
        if len(call.keywords) == 1 and not call.args and \
                isinstance(call.keywords[0].value, ast.Constant):
            swap = _call_of(target)
            if swap is not None and swap[0] == _dotted(call.func):
                target_call = ast.parse(target, mode="eval").body
                if not target_call.args and all(k.arg for k in target_call.keywords):
                    kw = call.keywords[0]
                    m.keyword_swap = (kw.arg, kw.value.value,
                                      [(k.arg, ast.unparse(k.value))
                                       for k in target_call.keywords])
            return
        if len(call.args) == 1 and isinstance(call.args[0], ast.Constant) and \
                isinstance(call.args[0].value, str) and "<T>" in call.args[0].value:
            m.legacy = (call.args[0].value, target)

    def _derive_modules(self):
        """torch.cuda -> torch.npu, torch.cuda.amp -> torch.npu.amp: the
        modules whose names the renames carry into another module."""
        seen = {}
        for source, m in self.names.items():
            if m.rename is None or m.member:
                continue
            src_module, tgt_module = source.rpartition(".")[0], m.rename.rpartition(".")[0]
            if src_module != tgt_module and _is_module(resolve(src_module)):
                seen.setdefault(src_module, set()).add(tgt_module)
        self.modules = {src: next(iter(tgts)) for src, tgts in seen.items() if len(tgts) == 1}

    # --- questions the scanner asks --------------------------------------

    def lookup(self, qualname):
        """The Meaning of a dotted name, by its spelling or by the object it
        names in torch (torch.amp.autocast is torch.autocast)."""
        m = self.names.get(qualname)
        if m is not None or not qualname.startswith("torch."):
            return m
        if qualname in self._resolved:
            return self._resolved[qualname]
        with warnings.catch_warnings():
            # A deprecated object (dist.reduce_op) warns when it is looked at.
            warnings.simplefilter("ignore")
            obj = resolve(qualname)
            found = None
            if obj is not None and not isinstance(obj, (str, int, float, bool, tuple)):
                found = self._by_id.get(id(_original(obj)))
        self._resolved[qualname] = found
        return found

    def is_module(self, qualname):
        if qualname in self.modules:
            return True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _is_module(resolve(qualname))

    def names_device(self, name):
        """Whether a keyword, variable, option or key of this name holds a
        device: it is one of the names the rows take a device by
        (``device``, ``map_location``, ``device_type``...), or ends with one."""
        return _named(name, self.device_names)

    def names_backend(self, name):
        return _named(name, self.backend_names)

    def is_data_parallel(self, qualname):
        """Whether a dotted name is torch's nn.DataParallel (or its
        function form)."""
        import torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = resolve(qualname)
        return obj is not None and (obj is torch.nn.DataParallel or
                                    obj is getattr(torch.nn.parallel, "data_parallel", None))


# --- helpers -----------------------------------------------------------------

def _named(name, names):
    n = name.lower().lstrip("-").replace("-", "_")
    return n in names or any(n.endswith("_" + d) for d in names)


def _spells_cuda(text):
    low = text.lower()
    return "cuda" in low or "cudnn" in low or "nccl" in low


def _device_or_none(text):
    try:
        return npu_device(text)
    except ValueError:
        return None


def _is_module(obj):
    return isinstance(obj, type(sys))


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _call_of(text):
    """(callee, arguments' source) of a target written as a call
    ("torch.distributed.is_backend_available('hccl')"), else None."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call) or _dotted(node.func) is None:
        return None
    args = [ast.unparse(a) for a in node.args] + \
        [f"{k.arg}={ast.unparse(k.value)}" for k in node.keywords if k.arg]
    return _dotted(node.func), ", ".join(args)
