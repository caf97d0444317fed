"""The patcher on whatever torch runs the tests, with torch_npu as the
backend: a stand-in torch_npu with no kernels (tests/stand_ins/torch_npu
with STAND_IN_KERNELS=0), which registers the npu device through torch's
own API and records the calls that reach it.  So it runs on every torch
line Ascend publishes torch_npu for, from 2.1 on, where the virtual NPU
cannot (``make test-torch`` runs this file on each; it imports nothing of
conftest.py, which migrates the test process on the virtual NPU).

Each row installs, rewrites device arguments, logs, reports and is put
back by identity."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

STAND_INS = Path(__file__).resolve().parent / "stand_ins"

SCRIPT = textwrap.dedent("""
    import json, sys, tempfile, warnings
    warnings.simplefilter("ignore")
    import torch
    import torch.distributed as dist

    saved = {name: getattr(torch.cuda, name)
             for name in ("synchronize", "set_device", "CUDAGraph", "graph", "is_available")}
    saved_memory = {name: getattr(torch.cuda.memory, name)
                    for name in ("_record_memory_history", "_snapshot", "_dump_snapshot")}
    saved_methods = (torch.Tensor.cuda, torch.nn.Module.cuda, dist.init_process_group)

    import transfer_to_npu
    import torch_npu

    out = {"backend": transfer_to_npu.backend, "kernels": torch_npu.KERNELS}
    torch.cuda.synchronize()
    torch.cuda.set_device("cuda:0")
    out["calls"] = list(torch_npu.npu.calls)
    out["set_device args"] = [str(a) for a in torch_npu.npu.arguments["set_device"]]
    out["device"] = str(torch.device("cuda:0"))
    out["is_available"] = torch.cuda.is_available()
    # No kernels: what a factory, .to() or .cuda() reached is in torch's
    # error, which names the device's dispatch key.
    reached = []
    for make in (lambda: torch.zeros(2, device="cuda"), lambda: torch.ones(2).to("cuda:0"),
                 lambda: torch.ones(2).cuda(), lambda: torch.empty(2, device=torch.device("cuda"))):
        try:
            make()
            reached.append("made")
        except (NotImplementedError, RuntimeError) as exc:
            reached.append("npu" if "'npu' backend" in str(exc) else str(exc))
    out["tensors reached"] = reached
    # torch.Generator's class is made by `type` before torch 2.12 (and on
    # every torch_npu line): its construction is patched all the same.
    # With no kernels, torch's error names the device the generator was
    # asked for.
    generators = []
    for spec in ("cuda", "cuda:0", torch.device("cuda")):
        try:
            generators.append(torch.Generator(device=spec).device.type)
        except RuntimeError as exc:
            generators.append("npu" if "PrivateUse1" in str(exc) else str(exc))
    out["generators reached"] = generators
    out["cpu generator"] = str(torch.Generator().device)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        pass
    out["graph is torch_npu's"] = isinstance(graph, torch_npu.npu.NPUGraph)
    out["graphs made"] = list(torch_npu.npu.graphs.made)
    torch.cuda.memory._record_memory_history("all")
    torch.cuda.memory._snapshot()
    torch.cuda.memory._dump_snapshot("snapshot.pickle")
    out["memory calls"] = [c for c in torch_npu.npu.calls if c.startswith("_")]
    allocator = torch.cuda.CUDAPluggableAllocator("alloc.so", "alloc", "free")
    out["allocator is torch_npu's"] = isinstance(allocator, torch_npu.npu.NPUPluggableAllocator)
    out["nvtx"] = torch.cuda.nvtx.range_push("step")

    # torch_npu names some parameters otherwise than CUDA (so does the
    # stand-in): CUDA's calls are adapted to its names.
    context = torch.cuda.StreamContext(stream=None)
    class Mine(torch.cuda.StreamContext):
        pass
    out["stream context"] = [type(context) is torch_npu.npu.StreamContext,
                             torch_npu.npu.arguments["StreamContext"] == (None,),
                             isinstance(torch_npu.npu.StreamContext(None),
                                        torch.cuda.StreamContext),
                             issubclass(Mine, torch_npu.npu.StreamContext)]
    out["device names"] = []
    for call in (lambda: torch.cuda.get_device_name(device="cuda:0"),
                 lambda: torch.cuda.get_device_name("cuda:0"), torch.cuda.get_device_name):
        call()
        out["device names"].append(str(torch_npu.npu.arguments["get_device_name"][0]))

    dist.init_process_group("nccl", init_method="file://" + tempfile.mktemp(), world_size=1,
                            rank=0)
    out["dist backend"] = dist.get_backend()
    t = torch.ones(3)
    dist.all_reduce(t)
    out["all_reduce"] = t.tolist()
    dist.destroy_process_group()

    out["mappings"] = {m["source"]: [m["target"], m["kind"], m["calls"]]
                       for m in transfer_to_npu.mappings()}
    # The builtins of torch.* and torch.fft.* whose op schemas have a device
    # argument, read from every schema.
    def schema_takes_device(name):
        try:
            schemas = torch._C._jit_get_schemas_for_operator("aten::" + name)
        except RuntimeError:
            return False
        return any(a.name == "device" for s in schemas for a in s.arguments)
    from transfer_to_npu._rules import factories
    out["factory rows"] = sorted(r[0] for r in factories.rows(torch))
    out["schema factories"] = sorted(
        f"{dotted}.{name}"
        for dotted, names, prefix in (("torch", dir(torch._C._VariableFunctions), ""),
                                      ("torch.fft", dir(torch.fft), "fft_"))
        for name in names if not name.startswith("_") and schema_takes_device(prefix + name))
    transfer_to_npu.disable()
    # The table torch_npu's release for this torch gets (its surface): what
    # CUDA's calls of each row reach takes them (tests/call_shapes_check.py).
    from transfer_to_npu import _rules, surfaces
    line = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    out["release call shapes"] = None
    if line in surfaces.lines():
        from call_shapes_check import mismatches
        release, release_npu = surfaces.load(line)
        def target_of(row):
            name = row[1].split(" ")[0]
            for prefix, obj in (("torch.npu.", release_npu), ("torch_npu.", release)):
                if name.startswith(prefix):
                    for part in name[len(prefix):].split("."):
                        obj = getattr(obj, part, None)
                    return obj
            return None
        rows = _rules.derive(torch, release_npu, release)[0]
        found, unread = mismatches(rows, "npu", {}, target_of)
        out["release call shapes"] = found
        out["release unread"] = sorted(unread)
    out["restored"] = (all(getattr(torch.cuda, n) is f for n, f in saved.items())
                       and all(getattr(torch.cuda.memory, n) is f
                               for n, f in saved_memory.items())
                       and (torch.Tensor.cuda, torch.nn.Module.cuda,
                            dist.init_process_group) == saved_methods)
    transfer_to_npu.enable()
    out["enabled again"] = torch.cuda.synchronize is not saved["synchronize"]
    print(json.dumps(out))
""")


def _line_of(text):
    """The script's line that holds text (as a call site names it)."""
    return next(i for i, line in enumerate(SCRIPT.splitlines(), 1) if text in line)


def _python(args, cwd, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("TRANSFER_TO_NPU")}
    full.update({"PYTHONPATH": os.pathsep.join([str(STAND_INS), str(STAND_INS.parent)]),
                 "STAND_IN_KERNELS": "0",
                 "TRANSFER_TO_NPU_BACKEND": "torch_npu", **env})
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    where = tmp_path_factory.mktemp("torch_line")
    script = where / "train.py"
    script.write_text(SCRIPT)
    proc = _python([str(script)], where, TRANSFER_TO_NPU_LOG="1",
                   TRANSFER_TO_NPU_LOG_FILE=str(where / "log.txt"),
                   TRANSFER_TO_NPU_REPORT=str(where / "report.json"))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return (out, (where / "log.txt").read_text(), json.loads((where / "report.json").read_text()),
            script)


def _torch_line():
    import torch

    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


def test_runs_on_the_torch_line_asked_for():
    """make test-torch says which line each venv is for: its torch is of
    that line (a dependency installed there must not replace it)."""
    line = os.environ.get("TEST_TORCH_LINE")
    if line is None:
        pytest.skip("not run by make test-torch")
    assert _torch_line() == line


def test_enables_with_torch_npu_on_this_torch(result):
    out = result[0]
    assert out["backend"] == "torch_npu" and out["kernels"] is False
    assert len(out["mappings"]) > 150


def test_cuda_calls_reach_torch_npu(result):
    out = result[0]
    assert out["calls"][:2] == ["synchronize", "set_device"]
    assert out["set_device args"] == ["npu:0"]
    assert out["device"] == "npu:0"
    assert out["is_available"] is True
    for name in ("synchronize", "set_device", "is_available"):
        assert out["mappings"][f"torch.cuda.{name}"][:2] == [f"torch.npu.{name}", "function"]


def test_tensors_go_to_the_npu(result):
    assert result[0]["tensors reached"] == ["npu"] * 4


def test_generators_go_to_the_npu(result):
    """torch.Generator(device='cuda') is the npu's on every torch line,
    whatever makes torch.Generator's class; a generator without a device
    stays the cpu's."""
    out = result[0]
    assert out["generators reached"] == ["npu"] * 3
    assert out["cpu generator"] == "cpu"
    # The strings rewritten (torch.device('cuda') is the npu's already).
    assert out["mappings"]["torch.Generator"] == ["torch.Generator", "constructor", 2]


def test_every_builtin_taking_a_device_is_mapped(result):
    """The factories' rows come from torch's dispatcher, not from reading
    each op's schemas: on this torch they are the same builtins, with
    torch.asarray (a binding with no op schema)."""
    out = result[0]
    rows = set(out["factory rows"])
    builtins = {r for r in rows if r.count(".") == 1 + r.startswith("torch.fft.")}
    assert {"torch.zeros", "torch.empty_like", "torch.tensor", "torch.fft.fftfreq"} <= builtins
    assert builtins - {"torch.Generator", "torch.Stream", "torch.Event"} == (
        set(out["schema factories"]) | {"torch.asarray"})


def test_migrates_at_interpreter_start(tmp_path):
    """TRANSFER_TO_NPU=1: the .pth file installed with the package."""
    proc = _python(["-c", "import torch; torch.cuda.synchronize(); import torch_npu, "
                          "transfer_to_npu; print(transfer_to_npu.backend, torch_npu.npu.calls)"],
                   tmp_path, TRANSFER_TO_NPU="1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["torch_npu", "['synchronize']"]


def test_renamed_counterparts_reach_torch_npu(result):
    out = result[0]
    assert out["graph is torch_npu's"] and out["graphs made"] == ["NPUGraph", "graph"]
    assert out["memory calls"] == ["_record_memory_history", "_snapshot", "_dump_snapshot"]
    assert out["allocator is torch_npu's"]
    mappings = out["mappings"]
    assert mappings["torch.cuda.CUDAGraph"] == ["torch.npu.NPUGraph", "class", 1]
    assert mappings["torch.cuda.graph"] == ["torch.npu.graph", "class", 1]
    assert mappings["torch.cuda.CUDAPluggableAllocator"] == [
        "torch.npu.NPUPluggableAllocator", "class", 1]
    for name in ("_record_memory_history", "_snapshot", "_dump_snapshot"):
        assert mappings[f"torch.cuda.memory.{name}"] == [f"torch.npu.memory.{name}", "function",
                                                          1]


def test_unsupported_stays_unsupported(result):
    out, _, report, _ = result
    assert out["nvtx"] == 0
    assert out["mappings"]["torch.cuda.nvtx.range_push"][1] == "unsupported"
    assert [u["api"] for u in report["unsupported"]] == ["torch.cuda.nvtx.range_push"]


def test_calls_are_adapted_to_torch_npus_parameter_names(result):
    """torch.cuda.StreamContext(stream=s) reaches torch_npu's
    StreamContext(stream_ctx), which stays the class CUDA's name stands
    for; a device argument is rewritten where CUDA's function has it, then
    passed under torch_npu's name."""
    out = result[0]
    assert out["stream context"] == [True, True, True, True]
    assert out["device names"] == ["npu:0", "npu:0", "None"]


# (source, parameter) -> why the table of torch_npu's release for a torch
# line takes CUDA's calls otherwise there: torch_npu has no counterpart of
# the parameter, and a call that passes another value than CUDA's default
# is refused, naming it (call_shapes.Keywords).
RELEASE_DIFFERENCES = {
    ("torch.cuda.MemPool", "use_on_oom"): "torch_npu's pools before 2.13 have no such option",
    ("torch.cuda.MemPool", "no_split"): "torch_npu's pools before 2.13 have no such option",
    ("torch.cuda.memory_snapshot", "mempool_id"): "torch_npu before 2.13 snapshots every pool",
    ("torch.profiler.profile", "acc_events"): "torch_npu's profiler does not accumulate events",
    ("torch.profiler.profile", "post_processing_timeout_s"): "torch_npu's profiler has no "
                                                             "timeout of its own",
    ("torch.profiler.profile", "execution_trace_observer"): "torch_npu before 2.12",
    ("torch.profiler.profile", "custom_trace_id_callback"): "torch_npu 2.7 and 2.10 on only",
    ("torch.profiler.schedule", "skip_first_wait"): "torch_npu 2.7 and 2.10 on only",
    ("torch.cuda.is_bf16_supported", "including_emulation"): "default False on torch_npu, which "
                                                             "does not read it",
    **{(f"torch.cuda.{m}make_graphed_callables", "capture_error_mode"):
       "torch_npu's make_graphed_callables (2.14) has no capture mode to choose"
       for m in ("", "graphs.")},
    # Methods of torch_npu's objects, called as torch_npu takes them.
    ("torch.cuda.MemPool.snapshot", "include_traces"): "a method of torch_npu's pool",
    ("torch.cuda.CUDAGraph.capture_begin", "check_input_liveness"): "a method of torch_npu's "
                                                                    "graph",
    ("torch.cuda.graphs.CUDAGraph.capture_begin", "check_input_liveness"): "a method of "
                                                                           "torch_npu's graph",
    **{(f"torch.cuda.{m}CUDAGraph.debug_dump", "verbose"): "a method of torch_npu's graph "
       "(2.14)" for m in ("", "graphs.")},
}


def test_the_torch_npu_release_for_this_torch_takes_cudas_calls(result):
    """Every row of the table the torch_npu release of this torch line gets
    (its surface, tests/call_shapes_check.py): its target takes CUDA's calls
    as they are, or as the table adapts them, but for what is recorded
    above."""
    out = result[0]
    if out["release call shapes"] is None:
        pytest.skip("torch_npu has no release for this torch line")
    left = {name: [what for what in found if (name, what[0]) not in RELEASE_DIFFERENCES]
            for name, found in out["release call shapes"].items()}
    assert {name: found for name, found in left.items() if found} == {}


def test_nccl_becomes_hccl(result):
    out = result[0]
    assert out["dist backend"] == "hccl" and out["all_reduce"] == [1.0, 1.0, 1.0]
    assert out["mappings"]["torch.distributed.init_process_group"][2] == 1


def test_log_names_each_mapping_and_call_site(result):
    _, log, _, script = result
    for source, target, line in (
            ("torch.cuda.synchronize", "torch.npu.synchronize", _line_of("cuda.synchronize()")),
            ("torch.cuda.CUDAGraph", "torch.npu.NPUGraph", _line_of("cuda.CUDAGraph()"))):
        assert any(source in entry and target in entry and f"{script}:{line}" in entry
                   for entry in log.splitlines()), (source, log)


def test_report_counts_calls_and_sites(result):
    _, _, report, script = result
    assert report["backend"] == "torch_npu"
    assert report["torch_version"].split("+")[0].startswith(_torch_line())
    counted = {m["source"]: m for m in report["mappings"]}
    assert counted["torch.cuda.memory._snapshot"]["count"] == 1
    assert counted["torch.cuda.memory._snapshot"]["sites"] == [
        f"{script}:{_line_of('memory._snapshot()')}"]


def test_disable_restores_by_identity(result):
    out = result[0]
    assert out["restored"] is True and out["enabled again"] is True


def test_list_with_torch_npu(tmp_path):
    proc = _python(["-m", "transfer_to_npu", "--list"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# ") and "torch_npu backend" in proc.stdout.splitlines()[0]
    assert any(line.split() == ["torch.cuda.CUDAGraph", "class", "torch.npu.NPUGraph"]
               for line in proc.stdout.splitlines())


def test_list_of_the_release_for_this_torch(tmp_path):
    """The table torch_npu's release for this torch line gets, from its
    names: derived with this torch."""
    line = _torch_line()
    proc = _python(["-m", "transfer_to_npu", "--list", "--torch-npu", line], tmp_path)
    if proc.returncode == 2 and "not a known release line" in proc.stderr:
        pytest.skip(f"torch_npu has no release for torch {line}")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert f"torch_npu {line}." in lines[0]
    for source, target in (("torch.cuda.CUDAGraph", "torch.npu.NPUGraph"),
                           ("torch.cuda.memory._record_memory_history",
                            "torch.npu.memory._record_memory_history"),
                           ("torch.cuda.synchronize", "torch.npu.synchronize")):
        assert any(line.split()[::2] == [source, target] for line in lines), source


def test_virtual_npu_says_which_torch_it_needs(tmp_path):
    import torch

    if hasattr(torch._C, "_acc") and hasattr(torch._C, "_dlpack_exchange_api"):
        pytest.skip("this torch has what the virtual NPU builds on")
    proc = _python(["-c", "import transfer_to_npu"], tmp_path, TRANSFER_TO_NPU_BACKEND="virtual")
    assert proc.returncode == 1
    assert "ImportError: the virtual NPU needs PyTorch 2.10 or newer, found " \
           f"{torch.__version__}" in proc.stderr
    assert "install torch_npu" in proc.stderr
