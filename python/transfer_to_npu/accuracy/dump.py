"""The dump: what each torch call, module forward and backward computes,
per step and rank, laid out as msprobe lays out its own (docs/accuracy.md).

Imported only when a dump is asked for (``TRANSFER_TO_NPU_DUMP``,
``--dump``): with it off nothing here exists in the process.  ``start()``
pushes a TorchFunctionMode (every torch API call, on any device, migrated
or not), adds torch's global module forward hooks and optimizer step
hooks, and registers the writing of the open step at exit.

The dump must not change what the run computes: statistics are computed
detached, under no_grad, with torch functions off (so nothing of the dump
is recorded), with no random draw; a backward is seen through tensor
hooks, which add no node to the graph.  Anything failing inside the dump
turns the dump off with a warning, never the run.
"""

import atexit
import inspect
import json
import os
import sys
import threading
import warnings
import weakref

import torch
from torch.overrides import TorchFunctionMode

from .. import _files
from . import branches as _branches, collectives as _collectives, draws as _draws
from . import names as _names
from . import outcome as _outcome
from . import percall as _percall, stats as _stats
from . import reference
from .settings import ENV, ENV_SEED, DumpError, Settings
from .stats import STATS

# Containers longer than this are recorded by their length (a DataLoader's
# collate stacks a batch of tensors: the stacked output says it all).
MAX_ITEMS = 16

# Conversions of a one-element tensor to a Python number: the values a
# script prints or logs (its loss), kept as scalars.
SCALAR_CONVERSIONS = frozenset(("item", "tolist", "__float__", "__format__"))

# Descriptor reads and writes (Tensor.grad, .shape, .T): no computation.
_ATTRIBUTE_ACCESS = frozenset(("__get__", "__set__", "__delete__"))


# --- the recorder --------------------------------------------------------------

class _Step:
    """What one step recorded, until it is written."""

    def __init__(self, index):
        self.index = index
        self.data = {}       # name -> {"input_args": ..., ...}
        self.stack = {}      # name -> "file:line"
        self.construct = {}  # name -> parent module record, or None
        self.scalars = []    # {"name", "site", "value"}
        self.pending = []    # (descriptor, tensor of STATS on a device), read at the end
        self.counts = {}     # name without counter -> calls so far
        self.saved = []      # (path, tensor) of kept tensors
        self.seen = {}       # id(tensor) -> (weakref, version, its statistics)
        self.blank = {}      # data_ptr -> version of memory not written yet
        self.checks = {}     # name -> the per-call check's verdict (percall.py)


class Recorder:
    def __init__(self, settings):
        self.settings = settings
        self.lock = threading.RLock()
        self.step = _Step(0)
        self.active = True   # recording
        self.closed = False  # the open step written (or never to be, in a forked child)
        self.in_optimizer = 0
        self.modules = []   # (module, record name, pending record) of the modules running
        self.roots = weakref.WeakKeyDictionary()  # root module -> {id(module): path}
        self.names = _names.api_names()
        self.decided = {}   # id(func) -> name, or False: never recorded
        self.prefixes = _internal_prefixes()
        self.task = "tensor" if settings.tensors else "statistics"
        self.undo = []
        self.host_view = _stats.host_view()
        self.data_dir = os.path.join(self.prefixes[0], "utils", "data", "")
        # The threads in a DataLoader's __next__ or a collective: what they
        # compute there is not the script's computation.
        self.loading = set()
        self.run = _outcome.Run(self)
        self.trace = None  # the device-name tests' trace function, when on
        self.checker = _percall.Checker(self) if settings.check else None

    # -- naming and places

    def recording(self):
        s = self.settings.steps
        return self.active and (s is None or self.step.index in s)

    def next_name(self, base, forward_last=False):
        """base.N.forward (an API), or base.forward.N (a module): the N-th
        call of base in this step."""
        counts = self.step.counts
        n = counts.get(base, 0)
        counts[base] = n + 1
        return f"{base}.forward.{n}" if forward_last else f"{base}.{n}.forward"

    def site(self, frame=None):
        """The user's file:line: the first frame outside torch and this
        package (the rule the mapping log uses)."""
        frame = sys._getframe(2) if frame is None else frame
        prefixes = self.prefixes
        while frame is not None and frame.f_code.co_filename.startswith(prefixes):
            frame = frame.f_back
        if frame is None:
            return None
        return f"{frame.f_code.co_filename}:{frame.f_lineno}"

    def caller(self, func):
        """The frame that called func, past torch's own dispatch to the
        mode (torch.overrides, and func's frame for a function in Python);
        called from the mode's _record."""
        frame = sys._getframe(3)
        code = getattr(func, "__code__", None)
        while frame is not None and (frame.f_code is code
                                     or frame.f_code.co_filename == _OVERRIDES):
            frame = frame.f_back
        return frame

    def ours(self, frame):
        """Whether a call is not the script's computation: made by this
        package's own code (the virtual NPU saving its tensors, a served
        package), through torch's or not, which the reference does not
        make; or loading data (a DataLoader's collation, pinning thread or
        dataset, in the main process here, in workers there)."""
        if frame is None or threading.get_ident() in self.loading:
            return True
        if frame.f_code.co_filename.startswith(self.data_dir):
            return True
        torch_dir, package_dir = self.prefixes
        while frame is not None and frame.f_code.co_filename.startswith(torch_dir):
            frame = frame.f_back
        return frame is not None and frame.f_code.co_filename.startswith(package_dir)

    def parent(self):
        if self.in_optimizer:
            return "optimizer"
        return self.modules[-1][1] if self.modules else None

    def module_path(self, module):
        if not self.modules:
            return ""
        root = self.modules[0][0]
        paths = self.roots.get(root)
        if paths is None or id(module) not in paths:
            paths = {id(m): p for p, m in root.named_modules(remove_duplicate=False)}
            self.roots[root] = paths
        return paths.get(id(module))

    # -- values

    def describe(self, value, name, where, depth=0, blank=False):
        """The JSON description of an argument or result: a tensor's
        dtype, shape and statistics (those left on a device filled in when
        the step is written)."""
        if isinstance(value, torch.Tensor):
            return self.describe_tensor(value, name, where, blank)
        if isinstance(value, (list, tuple)):
            if len(value) > MAX_ITEMS or depth > 2:
                return {"type": type(value).__name__, "length": len(value)}
            return [self.describe(v, name, f"{where}.{i}", depth + 1, blank)
                    for i, v in enumerate(value)]
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"type": type(value).__name__, "value": value}
        if isinstance(value, (torch.dtype, torch.device, torch.Size)):
            return {"type": f"torch.{type(value).__name__}", "value": str(value)}
        return {"type": type(value).__name__}

    def describe_tensor(self, t, name, where, blank=False):
        """blank: t's memory is not written yet (it has no statistics, and
        a later call that reads it before writing gets none either)."""
        step = self.step
        out = {"type": "torch.Tensor", "dtype": str(t.dtype), "shape": list(t.shape)}
        try:
            version = t._version
        except RuntimeError:  # inference tensors have none
            version = None
        seen = step.seen.get(id(t))
        # Memory not written yet is known by its address and version: the
        # tensor torch.empty made may come back as another object (the
        # Parameter made of it, which an initialiser then fills).
        address = t.data_ptr() if t.layout == torch.strided else None
        if blank:
            if address:
                step.blank[address] = version
        elif where.startswith("output"):
            step.blank.pop(address, None)  # written by this call
        if seen is not None and version is not None and seen[0]() is t and seen[1] == version:
            stats = seen[2]
        elif blank or address and version is not None and step.blank.get(address) == version:
            stats = None
        else:
            stats = self.stats(t)
            if version is not None:
                step.seen[id(t)] = (weakref.ref(t), version, stats)
        if stats is None:
            out.update(dict.fromkeys(STATS))
        elif isinstance(stats, list):
            out.update(zip(STATS, stats))
        else:
            out.update(dict.fromkeys(STATS))
            step.pending.append((out, stats))
        out["requires_grad"] = t.requires_grad
        if self.settings.keeps_tensors(name) and t.numel():
            data_name = f"{name}.{where}.pt"
            out["data_name"] = data_name
            step.saved.append((data_name, t.detach().to("cpu", copy=True)))
        return out

    def stats(self, t):
        """t's statistics: a list of floats, a tensor to read at the end of
        the step, or None."""
        try:
            floating = t.is_floating_point() or t.is_complex()
            host = self.host_view(t)
            if host is not None and not t.is_meta:
                try:
                    found = _stats.fast_stats(host)
                except Exception:  # a subclass with no memory of its own: torch's ops
                    found = None
                if found is not None:
                    return found
            x = _stats.prepare(t if host is None else host)
            if x is None:
                return None
            return _stats.device_stats(x, floating) if host is None else _stats.host_stats(x, floating)
        except Exception:  # a tensor with no statistics to give (a subclass's)
            return None

    def describe_call(self, name, args, kwargs):
        return {"input_args": [self.describe(a, name, f"input.{i}") for i, a in enumerate(args)],
                "input_kwargs": {k: self.describe(v, name, f"input.{k}")
                                 for k, v in kwargs.items()}}

    def add(self, name, record, site, parent):
        step = self.step
        step.data[name] = record
        step.stack[name] = site
        step.construct[name] = parent

    # -- backward

    def watch(self, name, output):
        """A tensor hook on each output that requires grad: the gradient
        that arrives there is <name>'s backward input."""
        if not torch.is_grad_enabled():
            return
        at = name.rfind(".forward")
        backward = f"{name[:at]}.backward{name[at + len('.forward'):]}"
        with torch._C.DisableTorchFunction():  # register_hook is a torch function
            self._watch(backward, output)

    def _watch(self, backward, output):
        for i, t in enumerate(output if isinstance(output, (list, tuple)) else (output,)):
            # Not a leaf (a parameter, which an in-place initialisation or
            # a .to() of the same device returns): its gradient is the
            # optimizer record's, and a hook on it would outlive the step.
            if isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is not None:
                try:
                    t.register_hook(_GradHook(self, backward, i))
                except RuntimeError:
                    pass  # a tensor that takes no hook (an inference tensor)

    def grad(self, name, index, grad):
        with self.lock, _quiet():
            if not self.recording():
                return
            record = self.step.data.get(name)
            if record is None:
                record = {"input": []}
                at = name.rfind(".backward")
                forward = f"{name[:at]}.forward{name[at + len('.backward'):]}"
                self.add(name, record, self.step.stack.get(forward),
                         self.step.construct.get(forward))
            inputs = record["input"]
            while len(inputs) <= index:
                inputs.append(None)
            inputs[index] = self.describe(grad, name, f"input.{index}")

    # -- steps and files

    def end_step(self):
        with self.lock:
            step = self.step
            self.step = _Step(step.index + 1)
        self.write(step)

    def rank(self):
        rank = os.environ.get("RANK")
        if rank is not None and rank.strip().isdigit():
            return int(rank)
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
        return 0

    def write(self, step):
        if not (step.data or step.scalars) or _data_worker():
            return
        with _quiet():
            self._write(step)

    def _write(self, step):
        _read_pending(step.pending)
        step_dir = os.path.join(self.settings.directory, f"step{step.index}")
        place = os.path.join(step_dir, f"rank{self.rank()}")
        write = _files.write_in_new_directory if _new_directory(step_dir, place) else \
            _files.replace
        tensor_dir = None
        if step.saved:
            tensor_dir = os.path.join(place, "dump_tensor_data")
            os.makedirs(tensor_dir, exist_ok=True)
            for data_name, tensor in step.saved:
                torch.save(tensor, os.path.join(tensor_dir, data_name))
        head = {"task": self.task, "level": "mix", "framework": "pytorch",
                "dump_data_dir": tensor_dir}
        head["data"] = step.data
        write(os.path.join(place, "dump.json"), json.dumps(head).encode())
        if step.checks:
            _percall.write(place, step.checks)
        files = [("stack.json", step.stack), ("construct.json", step.construct)]
        # scalars.json only where the step read one: each file a step makes
        # is a file created, which costs more than what most steps write.
        if step.scalars:
            files.append(("scalars.json", step.scalars))
        for filename, content in files:
            write(os.path.join(place, filename), json.dumps(content).encode())

    def finish(self):
        """Write the open step (at exit, on Ctrl-C and sys.exit too)."""
        if self.closed:
            return
        self.active, self.closed = False, True
        if self.run.tracer is not None:
            self.run.tracer.stop()
        with self.lock:
            step = self.step
        try:
            self.write(step)
            if not _data_worker():
                self.run.write(self.settings.directory, self.rank(), step.index)
        except Exception as exc:  # at exit: say so, lose nothing else
            warnings.warn(f"transfer_to_npu: the dump's last step could not be written ({exc})",
                          RuntimeWarning)

    def fail(self, exc):
        """An error of the dump's own: the dump stops, the run goes on."""
        if self.active:
            self.active = False
            warnings.warn(f"transfer_to_npu: the dump stopped ({type(exc).__name__}: {exc}); "
                          f"the run goes on without it", RuntimeWarning)


class _GradHook:
    __slots__ = ("recorder", "name", "index")

    def __init__(self, recorder, name, index):
        self.recorder, self.name, self.index = recorder, name, index

    def __call__(self, grad):
        try:
            self.recorder.grad(self.name, self.index, grad)
        except Exception as exc:
            self.recorder.fail(exc)


class _quiet:
    """No autograd and no torch functions (the dump records nothing of its
    own), and no trace function: the device-name tests' (branches.py)
    looks at the script's lines only, and on Python 3.11 a trace function
    slows every frame, the dump's own the most."""

    __slots__ = ("grad", "tf", "trace")

    def __enter__(self):
        # Torch functions off first: torch hands _set_grad_enabled to the
        # modes too.
        self.tf = torch._C.DisableTorchFunction()
        self.tf.__enter__()
        self.grad = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)
        self.trace = sys.gettrace()
        if self.trace is not None:
            sys.settrace(None)

    def __exit__(self, *exc):
        if self.trace is not None:
            sys.settrace(self.trace)
        torch._C._set_grad_enabled(self.grad)
        self.tf.__exit__(*exc)
        return False


def _new_directory(parent, place):
    """Make place, in parent (made too where missing); whether place is
    new (a step written again, at exit, or a dump directory used before
    has it already)."""
    try:
        os.mkdir(parent)
    except FileExistsError:
        pass
    except FileNotFoundError:  # the dump directory itself, removed meanwhile
        os.makedirs(parent, exist_ok=True)
    try:
        os.mkdir(place)
    except FileExistsError:
        return False
    return True


def _read_pending(pending):
    """Fill in the statistics left on devices, read with one transfer per
    device."""
    groups = {}
    for desc, stats in pending:
        groups.setdefault(stats.device, []).append((desc, stats))
    with _quiet():
        for items in groups.values():
            rows = torch.stack([stats for _, stats in items]).tolist()
            for (desc, _), row in zip(items, rows):
                desc.update(zip(STATS, row[:4]))
                desc.update(nan_count=int(row[4]), inf_count=int(row[5]))


def _forget_seen(seen, args, kwargs):
    for value in (*args, *kwargs.values()):
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(t, torch.Tensor):
                seen.pop(id(t), None)


def _has_tensor(value, depth=0):
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)) and depth < 2:
        return any(_has_tensor(v, depth + 1) for v in value[:MAX_ITEMS])
    return False


_OVERRIDES = os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "overrides.py")


def _internal_prefixes():
    from .. import _report

    return _report._internal_prefixes()


if hasattr(torch._C, "_current_graph_task_id"):
    def _in_backward():
        return torch._C._current_graph_task_id() != -1
else:  # pragma: no cover - torch before 2.0
    def _in_backward():
        return False


# --- the hooks -----------------------------------------------------------------

class _Mode(TorchFunctionMode):
    """Every torch API call: recorded when it computes a tensor (or turns a
    one-element tensor into a number), unless it runs inside a recorded
    call (torch pops the mode while one runs), inside backward (its calls
    differ by device), or inside optimizer.step()."""

    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # The device-name tests' trace (branches.py) is off while a call is
        # recorded: on Python 3.11 a trace function slows every frame, the
        # dump's own the most (a dumped step 1.74x without this, 1.5x
        # with), and the script's code is not inside a torch call.
        trace = sys.gettrace()
        if trace is None or trace is not self.recorder.trace:
            return self._record(func, args, kwargs)
        sys.settrace(None)
        try:
            return self._record(func, args, kwargs)
        finally:
            sys.settrace(trace)

    def _record(self, func, args, kwargs):
        if kwargs is None:
            kwargs = {}
        rec = self.recorder
        decided = rec.decided.get(id(func))
        if decided is False or rec.in_optimizer or not rec.active or _in_backward():
            return func(*args, **kwargs)
        try:
            if decided is None:
                decided = _decide(rec, func)
                if decided is False:
                    return func(*args, **kwargs)
            record = rec.recording() and rec.settings.wanted(decided)
            caller = None
            if record or decided.rpartition(".")[2] in SCALAR_CONVERSIONS:
                caller = rec.caller(func)
                if rec.ours(caller):
                    return func(*args, **kwargs)
            check = None
            if record:
                with rec.lock, _quiet():
                    name = rec.next_name(decided)
                    entry = rec.describe_call(name, args, kwargs)
                    site = rec.site(caller)
                    if rec.checker is not None:
                        check = rec.checker.before(decided, func, args, kwargs)
        except Exception as exc:
            rec.fail(exc)
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        if record and (decided.endswith("_") or "out" in kwargs):
            # Written in place: what was seen of its arguments is gone (a
            # version counter is not bumped by every device's kernels).
            _forget_seen(rec.step.seen, args, kwargs)
        if decided.rpartition(".")[2] in SCALAR_CONVERSIONS:
            return _scalar(rec, func, args, out, name if record else None,
                           entry if record else None, caller)
        if not record:
            return out
        try:
            if not _has_tensor(out) and not decided.endswith("__setitem__"):
                if rec.decided.get(id(func)) is None:
                    rec.decided[id(func)] = False  # metadata: size(), dim(), is_floating_point()
                return out
            rec.decided[id(func)] = decided
            with rec.lock, _quiet():
                shown = args[0] if decided.endswith("__setitem__") else out
                blank = _names.uninitialized(decided)
                entry["output"] = [rec.describe(shown, name, "output.0", blank=blank)] \
                    if isinstance(shown, torch.Tensor) else \
                    rec.describe(shown, name, "output", blank=blank)
                rec.add(name, entry, site, rec.parent())
            if check is not None:
                # Torch functions on (this mode is off while it handles a
                # call): the check's own mode sees the calls it makes.
                with rec.lock, torch.no_grad():
                    rec.step.checks[name] = rec.checker.after(check, args, kwargs, out)
            rec.watch(name, out)
        except Exception as exc:
            rec.fail(exc)
        return out


def _decide(rec, func):
    """A function's name, or False for one that is never recorded (an
    attribute read); whether it computes tensors is learnt from its first
    call."""
    name = getattr(func, "__name__", None)
    # An aten op itself (torch.ops.aten.empty.memory_format) is torch's
    # implementation, not an API the script calls: a device's kernels
    # written in Python (the virtual NPU's) make such calls, from C++.
    if name in _ATTRIBUTE_ACCESS or type(func).__module__ == "torch._ops":
        rec.decided[id(func)] = False
        return False
    found = rec.names.get(id(func)) or _names.fallback_name(func)
    return found


def _scalar(rec, func, args, out, name, entry, caller):
    """A tensor read as a Python number: the call recorded with its value
    and, read by the script itself (not by torch: a DataLoader's seed), a
    scalar of the curves."""
    t = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if t is None or t.numel() != 1:
        return out
    try:
        with rec.lock, _quiet():
            value = out if isinstance(out, (int, float)) and not isinstance(out, bool) else \
                t.detach().reshape(()).item()
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return out
            where = rec.site(caller)
            if caller is not None and not caller.f_code.co_filename.startswith(rec.prefixes):
                rec.step.scalars.append({"name": name or rec.decided.get(id(func)) or "",
                                         "site": where, "value": value})
            if entry is not None:
                entry["output"] = [{"type": type(value).__name__, "value": value}]
                rec.add(name, entry, where, rec.parent())
    except Exception as exc:
        rec.fail(exc)
    return out


def _module_pre_hook(rec):
    def pre_hook(module, args):
        if not rec.active or _in_backward():
            return
        try:
            with rec.lock, _quiet():
                path = rec.module_path(module)
                cls = type(module).__name__
                base = f"Module.{path}.{cls}" if path else f"Module.{cls}"
                name = rec.next_name(base, forward_last=True)
                entry = None
                if rec.recording() and rec.settings.wanted(name) and not rec.in_optimizer:
                    # Its inputs now; the record goes after the calls it
                    # makes, when its output is known (as msprobe's).
                    entry = (rec.describe_call(name, args, {}), rec.site(), rec.parent())
                rec.modules.append((module, name, entry))
        except Exception as exc:
            rec.fail(exc)
    return pre_hook


def _module_hook(rec):
    def hook(module, args, output):
        if not rec.modules or rec.modules[-1][0] is not module:
            return  # not ours (pushed before the dump started, or popped by an error)
        _, name, pending = rec.modules.pop()
        if pending is None or not rec.active:
            return
        try:
            entry, site, parent = pending
            with rec.lock, _quiet():
                entry["output"] = [rec.describe(output, name, "output.0")] \
                    if isinstance(output, torch.Tensor) else rec.describe(output, name, "output")
                rec.add(name, entry, site, parent)
            rec.watch(name, output)
        except Exception as exc:
            rec.fail(exc)
    return hook


def _optimizer_pre_hook(rec):
    def pre_hook(optimizer, args, kwargs):
        rec.in_optimizer += 1
        rec.step.seen.clear()  # gradients may have been changed in place (clipped)
        if not rec.recording():
            return
        try:
            with rec.lock, _quiet():
                params = [p for group in optimizer.param_groups for p in group["params"]]
                name = rec.next_name(f"Optimizer.{type(optimizer).__name__}.step")
                if not rec.settings.wanted(name):
                    return
                grads = [p.grad for p in params]
                entry = {"input_args": [rec.describe(g, name, f"input.{i}")
                                        for i, g in enumerate(grads[:1024])],
                         "input_kwargs": {}}
                rec.add(name, entry, rec.site(), None)
                optimizer.__dict__["_ttn_dump"] = (name, entry, params)
        except Exception as exc:
            rec.fail(exc)
    return pre_hook


def _optimizer_hook(rec):
    def hook(optimizer, args, kwargs):
        rec.in_optimizer = max(0, rec.in_optimizer - 1)
        rec.step.seen.clear()  # the parameters have changed in place
        pending = optimizer.__dict__.pop("_ttn_dump", None)
        try:
            if pending is not None and rec.active:
                name, entry, params = pending
                with rec.lock, _quiet():
                    entry["output"] = [rec.describe(p, name, f"output.{i}")
                                       for i, p in enumerate(params[:1024])]
            if rec.active:
                rec.end_step()
        except Exception as exc:
            rec.fail(exc)
    return hook


# --- starting ------------------------------------------------------------------

_recorder = None


def start(settings=None):
    """Start dumping this process (once); returns the recorder."""
    global _recorder
    if _recorder is not None:
        return _recorder
    settings = Settings.from_environment() if settings is None else settings
    os.makedirs(settings.directory, exist_ok=True)
    if _seed():
        kind = _draws.device_type()
        if kind is not None:
            _draws.install(kind)
    rec = Recorder(settings)
    mode = _Mode(rec)
    mode.__enter__()  # for the whole run, or until stop()
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer

    # Called also when a forward raises (where torch has always_call), so
    # that the stack of running modules stays whole.
    always = ({"always_call": True} if "always_call" in
              inspect.signature(nn_module.register_module_forward_hook).parameters else {})
    rec.undo = [nn_module.register_module_forward_pre_hook(_module_pre_hook(rec)).remove,
                nn_module.register_module_forward_hook(_module_hook(rec), **always).remove,
                optimizer.register_optimizer_step_pre_hook(_optimizer_pre_hook(rec)).remove,
                optimizer.register_optimizer_step_post_hook(_optimizer_hook(rec)).remove,
                lambda: mode.__exit__(None, None, None),
                _watch_loading(rec, mode)]
    rec.run.install()
    rec.undo.append(rec.run.uninstall)
    rec.undo.append(_collectives.install(rec, _quiet))
    _trace_branches(rec)
    if reference.requested() == "fp32":
        rec.undo.append(reference.full_precision())
        rec.run.facts["reference_precision"] = "fp32"
    atexit.register(rec.finish)
    global _fork_registered
    if hasattr(os, "register_at_fork") and not _fork_registered:
        # A forked child (a DataLoader worker) records nothing: its parent
        # writes the step it shares.
        os.register_at_fork(after_in_child=_forget)
        _fork_registered = True
    _recorder = rec
    return rec


_fork_registered = False


def stop():
    """Write the open step and take everything start() installed away (the
    mode must be the innermost one: a dump started and stopped around a
    piece of code, as the benchmark does)."""
    global _recorder
    rec, _recorder = _recorder, None
    if rec is None:
        return
    rec.finish()
    atexit.unregister(rec.finish)
    for undo in reversed(rec.undo):
        undo()


def _trace_branches(rec):
    """In a migrated run, the tests of a device or backend name that go
    another way than on CUDA (branches.py)."""
    import transfer_to_npu
    from .. import backends

    if not transfer_to_npu.is_enabled() or backends.installed not in backends.TARGETS:
        return
    device, backend, _ = backends.TARGETS[backends.installed]
    tracer = _branches.Tracer(device, backend)
    tracer.install()
    rec.run.tracer = tracer
    rec.trace = tracer.trace
    rec.undo.append(tracer.stop)


def _watch_loading(rec, mode):
    """Mark the thread in a DataLoader's __next__ while it runs (what it
    computes is data loading, done in workers where there are some), with
    the dump's mode off there where it is the innermost: a dataset indexes
    tensors by the thousand a step, which the mode would see one by one
    only to leave alone.  Return what undoes it."""
    from torch.utils.data import dataloader

    cls = dataloader._BaseDataLoaderIter
    original = cls.__dict__["__next__"]
    loading = rec.loading
    C = torch._C

    def __next__(self):
        me = threading.get_ident()
        if me in loading:  # a loader read by a loader's dataset
            return original(self)
        loading.add(me)
        depth = C._len_torch_function_stack()
        ours = depth and C._get_function_stack_at(depth - 1) is mode
        if ours:
            C._pop_torch_function_stack()
        try:
            return original(self)
        finally:
            if ours:
                C._push_on_torch_function_stack(mode)
            loading.discard(me)

    cls.__next__ = __next__
    return lambda: setattr(cls, "__next__", original)


def _forget():
    if _recorder is not None:
        _recorder.active, _recorder.closed = False, True


def _data_worker():
    """Whether this process is a DataLoader's worker (started afresh, it
    dumps what its dataset computes, which is its parent's to write)."""
    data = sys.modules.get("torch.utils.data")
    return data is not None and data.get_worker_info() is not None


def _seed():
    """The seed compare gives both runs (TRANSFER_TO_NPU_DUMP_SEED), before
    the script: random, numpy (when installed) and torch; whether there is
    one."""
    text = os.environ.get(ENV_SEED)
    if not text:
        return False
    try:
        seed = int(text)
    except ValueError:
        raise DumpError(f"{ENV_SEED}={text!r} must be an integer") from None
    import random

    random.seed(seed)
    try:
        import numpy
    except ImportError:
        pass
    else:
        numpy.random.seed(seed)
    torch.manual_seed(seed)
    return True


def requested():
    """Whether this process is asked to dump."""
    return bool(os.environ.get(ENV))
