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
import warnings

import pytest
import torch

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
