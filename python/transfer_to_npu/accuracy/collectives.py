"""Collectives recorded per rank, under msprobe's ``Distributed.*`` names
(``Distributed.all_reduce.0.forward``): their tensors before the call
(``input``) and the tensors they write after it (``output``), their group
as the ranks in it, and the rank that sends or receives.

``torch.distributed``'s functions are not torch functions (the dump's
mode does not see them): each is wrapped while the dump runs, in
``torch.distributed`` and in its ``distributed_c10d`` module.  A call with
``async_op=True`` records its inputs only (its result is there after
``wait()``, which is the script's to call).  What DDP reduces in its own
C++ is not a call: its effect is in the gradients the optimizer record
holds."""

import functools
import sys
import threading

# name -> the argument the collective writes (its output).
COLLECTIVES = {
    "all_reduce": "tensor", "broadcast": "tensor", "reduce": "tensor",
    "all_gather": "tensor_list", "all_gather_into_tensor": "output_tensor",
    "reduce_scatter": "output", "reduce_scatter_tensor": "output",
    "all_to_all": "output_tensor_list", "all_to_all_single": "output",
    "scatter": "tensor", "gather": "gather_list", "send": None, "recv": "tensor",
    "isend": None, "irecv": None,
}
# The collectives whose written tensor is an input too; the others' is
# memory to be written (its values before the call are no input).
READ_AND_WRITTEN = frozenset(("all_reduce", "broadcast", "reduce"))


def _position(fn, written):
    """Where the written argument is among the positional ones, or None."""
    if written is None:
        return None
    try:
        import inspect

        return list(inspect.signature(fn).parameters).index(written)
    except (TypeError, ValueError):
        return None


def _group(dist, kwargs):
    group = kwargs.get("group")
    try:
        ranks = dist.get_process_group_ranks(group) if group is not None else \
            list(range(dist.get_world_size()))
    except Exception:  # a group this rank is not in, or no group yet
        return None
    return {"type": "str", "value": ",".join(map(str, ranks))}


def install(rec, quiet):
    """Wrap the collectives; return what undoes it."""
    import torch.distributed as dist

    if not dist.is_available():
        return lambda: None
    from torch.distributed import distributed_c10d as c10d

    undo = []
    for name, written in COLLECTIVES.items():
        original = getattr(c10d, name, None)
        if original is None:
            continue
        wrapper = _wrap(rec, quiet, dist, name, original, written)
        for owner in (dist, c10d):
            if getattr(owner, name, None) is original:
                setattr(owner, name, wrapper)
                undo.append((owner, name, original))

    def restore():
        for owner, name, original in undo:
            if getattr(owner, name, None) is not None:
                setattr(owner, name, original)

    return restore


def _wrap(rec, quiet, dist, name, fn, written):
    base = f"Distributed.{name}"
    at = _position(fn, written)
    blank = name not in READ_AND_WRITTEN

    @functools.wraps(fn)
    def collective(*args, **kwargs):
        me = threading.get_ident()
        if (not rec.active or me in rec.loading or not rec.recording()
                or not rec.settings.wanted(base)):
            return fn(*args, **kwargs)
        try:
            caller = sys._getframe(1)
            if rec.ours(caller):
                return fn(*args, **kwargs)
            target = kwargs.get(written) if written in kwargs else \
                args[at] if at is not None and at < len(args) else None
            with rec.lock, quiet():
                call = rec.next_name(base)
                entry = {"input_args": [rec.describe(a, call, f"input.{i}",
                                                     blank=blank and a is target)
                                        for i, a in enumerate(args)],
                         "input_kwargs": {k: rec.describe(v, call, f"input.{k}",
                                                          blank=blank and v is target)
                                          for k, v in kwargs.items()}}
                group = _group(dist, kwargs)
                if group is not None:
                    entry["input_kwargs"]["group"] = group
                site = rec.site(caller)
        except Exception as exc:
            rec.fail(exc)
            return fn(*args, **kwargs)
        # Its own torch calls (a view of a complex tensor) are the
        # collective's, not the script's.
        rec.loading.add(me)
        try:
            out = fn(*args, **kwargs)
        finally:
            rec.loading.discard(me)
        try:
            with rec.lock, quiet():
                # Written by the backend's own code, which may leave the
                # version counter as it was: what was seen of it is gone.
                for t in target if isinstance(target, (list, tuple)) else (target,):
                    rec.step.seen.pop(id(t), None)
                if target is not None and not kwargs.get("async_op"):
                    entry["output"] = [rec.describe(target, call, "output.0")]
                rec.add(call, entry, site, rec.parent())
        except Exception as exc:
            rec.fail(exc)
        return out

    return collective
