"""Every API the table maps reaches a counterpart that takes the calls the
CUDA original takes: the same parameter names at the same places, the same
kinds (positional-only, keyword-only, ``*args``, ``**kwargs``), the same
defaults where a default is seen.  ``torch.cuda.stream(stream=s)`` reaches
``torch.npu.stream``, which must take ``stream=``.

Checked on the torch that runs (each torch line of CI), for the virtual
NPU's table and the cpu backend's (a compare's reference run).  Where a
builtin states no parameters, they are read from torch's stubs
(``torch/_C/__init__.pyi``) as positions only: whether it takes them by
keyword is not told there."""
import json
import warnings
from pathlib import Path

import pytest
import torch

import call_shapes_check
from call_shapes_check import mismatches
from transfer_to_npu import _rules, backends
from transfer_to_npu._rules import call_shapes

# Sources whose parameters Python cannot read and torch's stubs do not
# state, with what is known of them.
UNREADABLE = {
    **{f"torch.cuda.{t}Tensor": "the legacy tensor types: C constructors, which take "
                                "(*sizes or data, device=None) as their targets do"
       for t in ("BFloat16", "Bool", "Byte", "Char", "Double", "Float", "Half", "Int", "Long",
                 "Short")},
}

# (source, parameter) -> why the target differs there by design; the call
# is still taken.  (source, None): a method the target lacks.
INTENDED = {
    ("torch.cuda.Event.ipc_handle", None): "CUDA IPC: an event shared with another process",
    ("torch.cuda.Event.from_ipc_handle", None): "CUDA IPC: an event shared with another process",
}


def _derived(monkeypatch, backend):
    """The table's rows as the backend gets them (derived, not installed)."""
    monkeypatch.setattr(backends, "installed", backend)
    return _rules.derive(torch)[0]


@pytest.mark.parametrize("backend", ["virtual", "cpu"])
def test_every_target_takes_the_calls_cuda_takes(migrated, monkeypatch, backend):
    rows = _derived(monkeypatch, backend)
    found, unread = mismatches(rows, backends.TARGETS[backend][0], INTENDED, skip=UNREADABLE)
    assert found == {}
    assert unread == set(UNREADABLE) & {r[0] for r in rows}


def test_streams_by_keyword(migrated):
    """As a prefetcher writes it (timm's): the stream named by keyword."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(stream=s):
        assert torch.cuda.current_stream() == s
    assert torch.cuda.current_stream() != s
    with torch.cuda.StreamContext(stream=s):
        assert torch.cuda.current_stream() == s
    torch.cuda.set_stream(stream=s)
    assert torch.cuda.current_stream() == s
    torch.cuda.set_stream(torch.cuda.default_stream())
    assert torch.cuda.Event(enable_timing=True, external=False).query()


# --- a counterpart that takes CUDA's calls otherwise (torch_npu's) ---------

class NpuStreamContext:
    """torch_npu's StreamContext: its parameter named stream_ctx."""

    def __init__(self, stream_ctx):
        self.stream = stream_ctx


def cuda_graph(cuda_graph, pool=None, stream=None, capture_error_mode="global",
               enable_annotations=False, check_input_liveness=False):
    """CUDA's torch.cuda.graph, as torch 2.13 has it."""


def npu_graph(npu_graph, pool=None, stream=None, auto_dispatch_capture=False,
              capture_error_mode="global"):
    """torch_npu's: another name, a parameter put before capture_error_mode,
    CUDA's last two absent."""
    return npu_graph, pool, stream, auto_dispatch_capture, capture_error_mode


def cuda_snapshot(mempool_id=None, include_traces=True):
    """CUDA's memory_snapshot."""


def npu_snapshot():
    return "snapshot"


def test_a_renamed_parameter_reaches_the_counterparts():
    original = call_shapes.original(torch.cuda.StreamContext)
    adapted = call_shapes.Adapted("torch.cuda.StreamContext", original, NpuStreamContext)
    assert adapted(stream="s").stream == "s" and adapted("p").stream == "p"
    made = NpuStreamContext("x")
    assert isinstance(made, adapted) and issubclass(NpuStreamContext, adapted)

    class Mine(adapted):  # a base, as the class it makes
        pass

    assert Mine("y").stream == "y" and isinstance(Mine("y"), NpuStreamContext)
    with pytest.raises(TypeError, match="stream"):
        adapted()  # refused as CUDA's refuses it


def test_arguments_land_where_the_counterpart_takes_them():
    adapted = call_shapes.Adapted("torch.cuda.graph", cuda_graph, npu_graph)
    # capture_error_mode is CUDA's fourth positional argument, torch_npu's
    # fifth: it is passed by name.
    assert adapted("g", None, "s", "thread_local") == ("g", None, "s", False, "thread_local")
    assert adapted(cuda_graph="g")[0] == "g"
    # CUDA-only: taken, left out; warned when it asks for what the NPU
    # cannot do.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert adapted("g", enable_annotations=False)[0] == "g"
    with pytest.warns(UserWarning, match=r"torch.cuda.graph: check_input_liveness=True left "
                                         r"out: .*npu_graph takes no check_input_liveness "
                                         r"\(a debugging check"):
        adapted("g", check_input_liveness=True)


def test_a_parameter_with_no_counterpart_is_refused_unless_it_is_its_default():
    adapted = call_shapes.Adapted("torch.cuda.memory_snapshot", cuda_snapshot, npu_snapshot)
    assert adapted() == adapted(None) == "snapshot"
    with pytest.raises(TypeError, match=r"torch.cuda.memory_snapshot: mempool_id=\(1, 2\) has "
                                        r"no counterpart in .*npu_snapshot"):
        adapted(mempool_id=(1, 2))
    # include_traces is CUDA's only: its value is left out with a warning.
    with pytest.warns(UserWarning, match="include_traces=False left out"):
        assert adapted(include_traces=False) == "snapshot"


def test_only_torch_npus_counterparts_are_adapted(migrated, monkeypatch):
    """The virtual NPU's and the host's take CUDA's calls as they are (the
    test above); a torch_npu release's (its surface) are adapted where they
    name or place a parameter otherwise."""
    from transfer_to_npu import surfaces
    from transfer_to_npu._rules import cuda_module

    assert not any(isinstance(r[6], call_shapes.Adapted) for r in cuda_module.rows(torch))
    _, npu = surfaces.load("2.13")
    adapted = {r[0]: r[6] for r in cuda_module.rows(torch, npu)
               if isinstance(r[6], call_shapes.Adapted)}
    assert {"torch.cuda.StreamContext", "torch.cuda.get_device_name",
            "torch.cuda.graph"} <= set(adapted)
    assert "torch.cuda.synchronize" not in adapted


# --- the served packages against theirs -------------------------------------

# What the served packages take, read from the packages' own sources
# (scripts/served_surfaces.py: flash_attn 2.8.3, xformers 0.0.35, apex
# 25.05, torch_npu 2.14's operators and fused optimizers).
SERVED = Path(__file__).parent / "data" / "served_surfaces.json"

# (package.name[.method], parameter) -> why the served one differs there by
# design ((..., None): a method it lacks).
SERVED_INTENDED = {
    **{(f"apex.{norm}", "kwargs"): "what apex passes on to FusedLayerNorm "
                                   "(elementwise_affine) is taken by name"
       for norm in ("MixedFusedLayerNorm", "MixedFusedRMSNorm")},
    **{("apex.FusedAdam.step", p): "deprecated by apex, which raises for any of them"
       for p in ("grads", "output_params", "scale", "grad_norms")},
    ("apex.FusedAdam.step", "grad_scaler"): "apex's capturable AMP path: torch.amp.GradScaler "
                                            "unscales the served one before step()",
    ("apex.FusedSGD", "lr"): "apex requires it; the served default is torch.optim.SGD's 1e-3",
    ("torch_npu.NpuFusedSGD", "lr"): "torch_npu requires it; the served default is "
                                     "torch.optim.SGD's 1e-3",
    **{("torch_npu.NpuFusedSGD", p): "torch_npu's constant is 0.0 (optim/npu_fused_sgd.py)"
       for p in ("momentum", "dampening", "weight_decay")},
    ("torch_npu.npu_format_cast", "dst"): "the tensor overload's argument, at the place of the "
                                          "int one's acl_format; dst= by name too",
    ("apex.FusedSGD.get_momentums", None): "apex's fused kernel's internals",
    **{(f"apex.DistributedDataParallel.{m}", None): "apex's bucketing; torch's DDP does its own"
       for m in ("allreduce_bucket", "allreduce_fallback", "allreduce_maybe_retain",
                 "comm_ready_buckets", "create_hooks", "disable_allreduce", "enable_allreduce",
                 "sync_bucket_structure")},
}

# Methods of the real packages the served ones lack (an AttributeError).
NOT_SERVED = {
    **{(f"torch_npu.{o}.{m}", None): "the flat buffers of torch_npu's fused kernels"
       for o in ("NpuFusedAdam", "NpuFusedAdamW", "NpuFusedSGD")
       for m in ("get_combined_params", "get_combined_grads")},
    **{(f"xformers.{mask}.{m}", None): "xformers' mask API beyond from_seqlens, make_causal, "
                                       "split and materialize"
       for mask in ("BlockDiagonalMask", "BlockDiagonalCausalMask")
       for m in ("to", "from_tensor_list", "from_tensor_lists_qkv", "split_queries", "split_kv",
                 "make_causal_from_bottomright", "make_local_attention",
                 "make_local_attention_from_bottomright")},
    **{(f"xformers.{mask}.to", None): "xformers' mask API beyond materialize"
       for mask in ("LowerTriangularMask", "LowerTriangularFromBottomRightMask",
                    "LowerTriangularMaskWithTensorBias")},
    ("xformers.LowerTriangularFromBottomRightMask.make_local_attention", None): "xformers' "
        "mask API beyond materialize",
}


def _served_shapes(top, name, entry, obj):
    """(label, what the real one takes, what the served one takes) of a
    served name and, for a class, of its methods (None: it lacks one)."""
    label = f"{top}.{name}"
    if entry[0] == "op":  # each overload of the operator
        for text in entry[1:]:
            yield label, call_shapes.from_text(text), call_shapes.signature(obj)
        return
    if entry[1] is not None:
        yield label, call_shapes.from_text(entry[1]), call_shapes.signature(obj)
    for method, text in (entry[2] if len(entry) > 2 else {}).items():
        yield f"{label}.{method}", call_shapes.from_text(text), call_shapes_check.method(obj,
                                                                                        method)


def test_served_packages_take_the_calls_theirs_take(migrated):
    import importlib

    from transfer_to_npu import _served

    found = {}
    for top, package in json.loads(SERVED.read_text()).items():
        for module, entries in package["modules"].items():
            served = importlib.import_module(_served.MODULES[module], "transfer_to_npu")
            for name, entry in entries.items():
                obj = call_shapes.original(getattr(served, name))
                for label, theirs, mine in _served_shapes(top, name, entry, obj):
                    if mine is None:
                        what = [(None, "no counterpart")]
                    else:
                        what = call_shapes.differences(theirs, mine)
                    what = [f"{p}: {w}" for p, w in what
                            if (label, p) not in SERVED_INTENDED and (label, p) not in NOT_SERVED]
                    if what:
                        found[label] = what
    assert found == {}


def test_served_operators_refuse_what_they_do_not_compute(migrated):
    """torch_npu's newer arguments are taken; one the virtual NPU has no
    math for is refused, naming it, unless it is its default."""
    import torch_npu

    q = torch.randn(1, 2, 4, 8, device="npu")
    out = torch_npu.npu_fusion_attention(q, q, q, 2, "BNSD", softmax_layout="", sink=None,
                                         seed=3, offset=5)
    assert out[0].shape == q.shape
    with pytest.raises(NotImplementedError, match=r"npu_fusion_attention: sink=tensor.* is not "
                                                  r"available on the virtual NPU"):
        torch_npu.npu_fusion_attention(q, q, q, 2, "BNSD", sink=torch.zeros(2, device="npu"))
    assert torch_npu.npu_format_cast(q, dst=q) is q and torch_npu.npu_rms_norm(
        input=q, gamma=torch.ones(8, device="npu"))[0].shape == q.shape


# --- the virtual NPU presented as torch_npu ---------------------------------

# (torch_npu.npu name[.method], parameter) -> why the virtual NPU's differs
# there by design ((..., None): a method it lacks).
AS_TORCH_NPU = {
    **{(f"torch_npu.npu.{name}", npu): f"CUDA's {cuda} at its place (CUDA's calls reach it), "
                                       f"torch_npu's {npu}= by name: one argument"
       for name, cuda, npu in (("StreamContext", "stream", "stream_ctx"),
                               ("get_device_name", "device", "device_name"),
                               ("get_device_properties", "device", "device_name"))},
    ("torch_npu.npu.amp.GradScaler", "dynamic"): "CUDA's enabled at its place "
                                                 "(torch.cuda.amp.GradScaler reaches it); "
                                                 "torch_npu's dynamic= by name",
    ("torch_npu.npu.amp.GradScaler", "enabled"): "CUDA's place, not torch_npu's",
    ("torch_npu.npu.is_bf16_supported", "including_emulation"): "not read: the host computes "
                                                                "bfloat16",
    ("torch_npu.npu.Event.recorded_time", None): "the time stamp of torch_npu's runtime",
}


def test_the_virtual_npu_takes_torch_npus_calls(migrated):
    """Code written for torch_npu (a converted copy) calls torch.npu as
    torch_npu's release for this torch line has it (its surface)."""
    from transfer_to_npu import surfaces

    line = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    line = line if line in surfaces.lines() else surfaces.lines()[-1]
    release, release_npu = surfaces.load(line)
    found = {}
    for module, data in surfaces.read(line)["modules"].items():
        if not module.startswith("torch_npu.npu"):
            continue
        names = data["names"]
        path = module[len("torch_npu.npu"):].lstrip(".").split(".")
        theirs_module, mine_module = release_npu, torch.npu
        for part in filter(None, path):
            theirs_module = getattr(theirs_module, part, None)
            mine_module = getattr(mine_module, part, None)
        for name, entry in names.items():
            mine = getattr(mine_module, name, None)
            if name.startswith("_") or entry[0] not in ("function", "class") or mine is None:
                continue  # what the virtual NPU does not present
            theirs = getattr(theirs_module, name)
            shapes = [(f"{module}.{name}", call_shapes.signature(theirs),
                       call_shapes.signature(mine))]
            if isinstance(mine, type):
                shapes += [(f"{module}.{name}.{m}", call_shapes_check.method(theirs, m),
                            call_shapes_check.method(mine, m) if hasattr(mine, m) else False)
                           for m in (entry[2] if len(entry) > 2 else {})]
            for label, them, me in shapes:
                if them is None or me is None:
                    continue  # not read: a C class's
                what = [(None, "no counterpart")] if me is False else \
                    call_shapes.differences(them, me)
                what = [f"{p}: {w}" for p, w in what if (label, p) not in AS_TORCH_NPU]
                if what:
                    found[label] = what
    assert found == {}
