"""python -m transfer_to_npu analyze: a static scan that lists every CUDA
spelling by file, line and kind, reports what has no NPU counterpart, and
skips bad files one by one."""
import csv
import json
import os
import textwrap
import time

import pytest

import static_trees
from conftest import EXAMPLES, ROOT, run_python

from transfer_to_npu.static import analyze
from transfer_to_npu.static.sources import Progress

# On the torch line of `make test` only: the static tools read source, whatever torch runs.
pytestmark = pytest.mark.main_line

SEEDS = ROOT / "tests" / "data" / "seeds"


@pytest.fixture(scope="module")
def sp():
    return analyze.spellings()


def found(report, path=None):
    """(line, category, kind, api) of each finding but advice, for one file
    or all."""
    return [(f.line, f.category, f.kind, f.api) for f in report.findings
            if (path is None or f.file == str(path)) and f.category != "advice"]


def write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


# --- every spelling of the seeds and the examples -------------------------

def test_seed_quickstart(sp):
    """The seed's quick-start CNN, as written for a GPU (extracted from the
    guide as it is)."""
    path = SEEDS / "quickstart_train.py"
    report = analyze.analyze([str(path)], sp)
    assert found(report) == [(3, "change", "import", "torch_npu"),
                             (9, "change", "constructor", "torch.device")]
    assert report.findings[1].code == "torch.device('cuda:0')"
    assert report.findings[1].result == "torch.device('npu:0')"
    assert report.findings[1].column == 23


def test_seed_ddp_in_its_gpu_shape(sp):
    path = SEEDS / "ddp_shell_train.py"
    report = analyze.analyze([str(path)], sp)
    assert found(report) == [
        (11, "change", "import", "torch_npu"),
        (17, "change", "import", "torch.cuda"),             # from torch.cuda import amp
        (41, "change", "backend", "backend"),               # def ddp_setup(..., backend='nccl')
        (44, "change", "backend_check", "backend check"),  # assert backend in ['gloo', 'nccl']
        (51, "change", "function", "torch.cuda.set_device"),
        (54, "change", "constructor", "torch.device"),      # torch.device('cuda:{}'.format(...))
        (59, "change", "device_string", "loc"),             # loc = 'cuda:{}'.format(...)
        (63, "change", "class", "torch.cuda.amp.GradScaler"),
        (73, "change", "function", "torch.cuda.is_available"),
        (74, "change", "method", "torch.Tensor.cuda"),
        (75, "change", "method", "torch.Tensor.cuda"),
        (76, "change", "class", "torch.cuda.amp.autocast"),
    ]
    by_line = {f.line: f for f in report.findings}
    assert by_line[17].result == "from torch.npu import amp"
    assert by_line[54].result == "torch.device('npu:{}'.format(args.gpu))"
    assert by_line[59].result == "loc = 'npu:{}'.format(args.gpu)"
    # backend, whose default the conversion makes 'hccl', is tested for it.
    assert by_line[44].result == "backend in ['gloo', 'hccl']"


def test_examples(sp):
    report = analyze.analyze([str(EXAMPLES)], sp)
    assert not report.skipped
    assert found(report, EXAMPLES / "train_cnn.py") == [
        (8, "change", "import", "torch_npu"), (13, "change", "constructor", "torch.device")]
    assert found(report, EXAMPLES / "ddp_train.py") == [
        (18, "change", "import", "torch_npu"),
        (54, "change", "backend", "backend"),
        (54, "change", "function", "torch.distributed.is_nccl_available"),
        (71, "change", "function", "torch.cuda.set_device"),
        (72, "change", "constructor", "torch.device"),      # f"cuda:{gpu}"
        (77, "change", "method", "torch.Tensor.cuda"),
        (88, "change", "device_arg", "torch.load"),         # map_location=f"cuda:{gpu}"
        (99, "change", "method", "torch.Tensor.cuda"),
        (100, "change", "method", "torch.Tensor.cuda"),
    ]
    assert found(report, EXAMPLES / "fsdp_train.py") == [
        (13, "change", "import", "torch_npu"),
        (70, "change", "function", "torch.cuda.set_device"),
        (71, "change", "backend", "torch.distributed.init_process_group"),
        (73, "change", "device_arg", "torch.distributed.device_mesh.init_device_mesh"),
        (76, "change", "method", "torch.Tensor.cuda"),
        (90, "change", "method", "torch.Tensor.cuda"),
        (90, "change", "method", "torch.Tensor.cuda"),
    ]
    ddp = {(f.line, f.api): f.result for f in report.findings
           if f.file == str(EXAMPLES / "ddp_train.py")}
    assert ddp[(54, "torch.distributed.is_nccl_available")] == \
        "dist.is_backend_available('hccl')"
    assert ddp[(54, "backend")].startswith('backend = "hccl" if')


# --- what is and is not a device --------------------------------------------

def test_only_device_and_backend_specifications(sp, tmp_path):
    write(tmp_path, {"train.py": """\
        import torch
        import torch.distributed as dist
        ckpt = torch.load("/ckpt/cuda_run/model.pt", map_location="cuda:1")
        log = open("cuda_notes.txt")
        kernel_name = "cuda_fused"
        dist.init_process_group("nccl", init_method="tcp://nccl-host:23456")
        group = dist.new_group(backend="cpu:gloo,cuda:nccl")
        x = torch.zeros(2, device=torch.device("cuda", 1))
        with torch.autocast(device_type="cuda"):
            pass
        model = torch.nn.Linear(2, 2).to("cuda:0", non_blocking=True)
        print("training on cuda")
    """})
    report = analyze.analyze([str(tmp_path)], sp)
    changes = {(f.line, f.result) for f in report.findings if f.category == "change"}
    assert changes == {
        (1, "import torch; import torch_npu"),
        (3, 'torch.load("/ckpt/cuda_run/model.pt", map_location="npu:1")'),
        (6, 'dist.init_process_group("hccl", init_method="tcp://nccl-host:23456")'),
        (7, 'dist.new_group(backend="cpu:gloo,npu:hccl")'),
        (8, 'torch.device("npu", 1)'),
        (9, 'torch.autocast(device_type="npu")'),
        (11, 'torch.nn.Linear(2, 2).to("npu:0", non_blocking=True)'),
    }
    assert all(f.category == "change" for f in report.findings)


def test_device_checks_and_strays_need_a_hand_edit(sp, tmp_path):
    """A test of something the conversion does not make the npu's (an
    environment variable, the backend torch reports) is left as written;
    so is a device string that goes nowhere a device goes."""
    write(tmp_path, {"check.py": """\
        import os
        import torch
        import torch.distributed as dist
        def f(x):
            if os.environ.get("ACCELERATOR") == "cuda":
                return 1
            if dist.get_backend() == "nccl":
                return 2
            devices = ["cuda", "cpu"]
            bad = torch.device("cuda:x")
    """})
    report = analyze.analyze([str(tmp_path)], sp)
    hand = [(f.line, f.kind, f.api) for f in report.findings if f.category == "unsupported"]
    assert hand == [(5, "hand_edit", "device check"), (7, "hand_edit", "backend check"),
                    (9, "hand_edit", "device string"), (10, "hand_edit", "torch.device")]


def test_device_and_backend_tests_converted_with_their_operand(sp, tmp_path):
    """nanoGPT's `device_type = 'cuda' if 'cuda' in device else 'cpu'`: the
    test of a device (or backend) the conversion makes the npu's is made
    the npu's with it, else converted code takes the CPU path."""
    write(tmp_path, {"train.py": """\
        import torch
        device = 'cuda:0'
        backend = 'nccl'
        device_type = 'cuda' if 'cuda' in device else 'cpu'
        use_fused = device_type == 'cuda'
        pin = device.startswith(('cuda', 'cuda:'))
        on_gpu = torch.device(device).type in ('cuda', 'xpu')
        def step(x, args):
            if x.device.type != 'cuda' or args.device == 'cuda:1':
                pass
            if str(x.device) == 'cuda:0' and backend == 'nccl':
                pass
            if args.dist_backend == 'nccl':
                pass
    """})
    report = analyze.analyze([str(tmp_path)], sp)
    checks = [(f.line, f.kind, f.result) for f in report.findings if f.kind.endswith("_check")]
    assert checks == [
        (4, "device_check", "'npu' in device"),
        (5, "device_check", "device_type == 'npu'"),
        (6, "device_check", "device.startswith(('npu', 'npu:'))"),
        (7, "device_check", "torch.device(device).type in ('npu', 'xpu')"),
        (9, "device_check", "x.device.type != 'npu'"),
        (9, "device_check", "args.device == 'npu:1'"),
        (11, "device_check", "str(x.device) == 'npu:0'"),
        (11, "backend_check", "backend == 'hccl'"),
        (13, "backend_check", "args.dist_backend == 'hccl'"),
    ]
    assert [f for f in report.findings if f.category != "change"] == []


def test_unsupported_api_and_cuda_extension(sp, tmp_path):
    """A code base with an API the NPU lacks, a CUDA C++ extension, CUDA
    sources, CUDA-only packages and a Triton kernel: each in its list."""
    write(tmp_path, {
        "train.py": """\
            import torch
            import flash_attn
            from torch.utils.cpp_extension import load_inline
            ops = load_inline(name="ops", cpp_sources="", cuda_sources="__global__ void k() {}")
            torch.cuda.nvtx.range_push("forward")
            graph = torch.cuda.CUDAGraph()
            torch.backends.cudnn.benchmark = True
        """,
        "setup.py": """\
            from setuptools import setup
            from torch.utils.cpp_extension import BuildExtension, CUDAExtension
            setup(name="fused", ext_modules=[CUDAExtension("fused", ["fused.cpp", "fused_kernel.cu"])],
                  cmdclass={"build_ext": BuildExtension})
        """,
        "fused_kernel.cu": """\
            #include <cuda_runtime.h>
            __global__ void fused_add(float *x, int n) { }
            __global__ void __launch_bounds__(256) fused_scale(float *x) { }
        """,
        "kernels.py": """\
            import triton
            import triton.language as tl

            @triton.jit
            def add_kernel(x_ptr, n, BLOCK: tl.constexpr):
                pass
        """,
    })
    report = analyze.analyze([str(tmp_path)], sp)
    rows = {(os.path.basename(f.file), f.line, f.category, f.kind, f.api)
            for f in report.findings if f.category != "change"}
    assert rows == {
        ("fused_kernel.cu", 1, "cuda_op", "cuda_source", "#include <cuda_runtime.h>"),
        ("fused_kernel.cu", 2, "cuda_op", "cuda_source", "kernel fused_add"),
        ("fused_kernel.cu", 3, "cuda_op", "cuda_source", "kernel fused_scale"),
        ("kernels.py", 1, "cuda_op", "package", "triton"),
        ("kernels.py", 2, "cuda_op", "package", "triton.language"),
        ("kernels.py", 4, "cuda_op", "kernel", "triton.jit"),
        ("setup.py", 3, "cuda_op", "extension", "torch.utils.cpp_extension.CUDAExtension"),
        ("train.py", 2, "cuda_op", "package", "flash_attn"),
        ("train.py", 4, "cuda_op", "extension", "torch.utils.cpp_extension.load_inline"),
        ("train.py", 5, "unsupported", "unsupported", "torch.cuda.nvtx.range_push"),
        ("train.py", 6, "unsupported", "unsupported", "torch.cuda.CUDAGraph"),
        ("train.py", 7, "unsupported", "unknown", "torch.backends.cudnn.benchmark"),
    }
    graph = next(f for f in report.findings if f.api == "torch.cuda.CUDAGraph")
    assert "NPUGraph" in graph.result  # the table's own reason
    # cudnn.benchmark changes nothing on the NPU: no hand work.
    assert report.hand_work()[0] == (str(tmp_path / "train.py"), 4)


# --- reports -------------------------------------------------------------------

def test_cli_writes_the_reports(tmp_path):
    write(tmp_path / "code", {"train.py": """\
        import torch
        x = torch.ones(2).cuda()
        torch.cuda.nvtx.range_push("step")
        import apex
    """})
    out = tmp_path / "out"
    proc = run_python(["-m", "transfer_to_npu", "analyze", str(tmp_path / "code"),
                       "--output", str(out)])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no progress line when stderr is not a terminal
    summary = proc.stdout
    assert "analyze: 1 Python files (4 lines)" in summary
    assert "change_list.csv" in summary and "hand work first" in summary
    path = str(tmp_path / "code" / "train.py")
    with open(out / "change_list.csv", newline="", encoding="utf-8") as f:
        changes = list(csv.DictReader(f))
    assert list(changes[0]) == ["file", "line", "end_line", "column", "kind", "api", "code",
                                "becomes", "suggestion"]
    assert [(r["file"], r["line"], r["column"], r["kind"], r["code"], r["becomes"])
            for r in changes] == [
        (path, "1", "1", "import", "import torch", "import torch; import torch_npu"),
        (path, "2", "5", "method", "torch.ones(2).cuda()", "torch.ones(2).npu()")]
    with open(out / "unsupported_api.csv", newline="", encoding="utf-8") as f:
        unsupported = list(csv.DictReader(f))
    assert [(r["line"], r["api"], r["reason"]) for r in unsupported] == [
        ("3", "torch.cuda.nvtx.range_push", "NVTX ranges annotate CUDA profiles; skipped")]
    assert "reason" in unsupported[0] and unsupported[0]["suggestion"]
    with open(out / "cuda_op_list.csv", newline="", encoding="utf-8") as f:
        ops = list(csv.DictReader(f))
    assert [(r["line"], r["kind"], r["api"]) for r in ops] == [("4", "package", "apex")]
    data = json.loads((out / "migration_report.json").read_text(encoding="utf-8"))
    # The JSON report holds the same rows, with the CSV's values typed.
    for name, rows in (("change_list", changes), ("unsupported_api", unsupported),
                       ("cuda_op_list", ops)):
        assert [{k: str(v) for k, v in r.items()} for r in data[name]] == rows
    assert data["summary"]["lines"] == 4 and data["skipped"] == []


def test_cli_output_links_fifos_and_rerun(tmp_path):
    """--output may be a shared directory: a link planted at a report's name
    is not followed (its target is kept) and a FIFO there is not waited on,
    each an error naming --output; the reports of an earlier run there are
    replaced."""
    write(tmp_path / "code", {"train.py": "import torch\nx = torch.ones(2).cuda()\n"})
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / "change_list.csv").symlink_to(victim)
    argv = ["-m", "transfer_to_npu", "analyze", str(tmp_path / "code"), "--output", str(out)]
    proc = run_python(argv)
    assert proc.returncode == 2 and "--output" in proc.stderr and "link" in proc.stderr
    assert victim.read_text() == "precious\n"
    (out / "change_list.csv").unlink()
    os.mkfifo(out / "change_list.csv")
    proc = run_python(argv, timeout=120)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr
    (out / "change_list.csv").unlink()
    for _ in range(2):
        proc = run_python(argv)
        assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "advice_list.csv", "change_list.csv", "cuda_op_list.csv", "migration_report.json",
        "unsupported_api.csv"]


def test_cli_bad_arguments(tmp_path):
    proc = run_python(["-m", "transfer_to_npu", "analyze"])
    assert proc.returncode == 2 and "PATH" in proc.stderr
    proc = run_python(["-m", "transfer_to_npu", "analyze", str(tmp_path),
                       "--runtime-report", str(tmp_path / "missing.json")])
    assert proc.returncode == 2 and "--runtime-report" in proc.stderr
    assert "missing.json" in proc.stderr


def test_progress_line_on_a_terminal():
    class Terminal:
        text = ""

        def isatty(self):
            return True

        def write(self, s):
            self.text += s

        def flush(self):
            pass

    t = Terminal()
    p = Progress("analyze", t)
    p.update("3 Python files, 120 lines, 4 findings")
    p.update("4 Python files, 130 lines, 4 findings")  # within 0.1 s: not shown
    assert t.text == "\ranalyze: 3 Python files, 120 lines, 4 findings"
    p.done()
    assert t.text.endswith("\r")


def test_joined_with_a_migrated_run(sp, tmp_path):
    """A migrated run's report says which findings ran."""
    script = write(tmp_path, {"train.py": """\
        import torch
        x = torch.zeros(2, device="cuda")
        y = x.cuda()
        def never_called():
            torch.cuda.synchronize()
        torch.cuda.manual_seed(0)
    """}) / "train.py"
    run = tmp_path / "run.json"
    proc = run_python(["-m", "transfer_to_npu", "--report", str(run), str(script)],
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = analyze.analyze([str(script)], sp)
    report.join_runtime(analyze.load_runtime_report(run))
    ran = {(f.line, f.api): f.ran for f in report.findings}
    assert ran == {(1, "torch_npu"): "no", (2, "torch.zeros"): "yes",
                   (3, "torch.Tensor.cuda"): "yes", (5, "torch.cuda.synchronize"): "no",
                   (6, "torch.cuda.manual_seed"): "yes"}
    out = tmp_path / "out"
    report.write(out)
    with open(out / "change_list.csv", newline="", encoding="utf-8") as f:
        assert next(csv.DictReader(f))["ran"] == "no"


# --- bad input, large trees -----------------------------------------------------

def test_bad_files_are_reported_and_skipped(sp, tmp_path):
    write(tmp_path, {"good.py": "import torch\ntorch.cuda.synchronize()\n",
                     "broken.py": "import torch\ndef f(:\n    pass\n"})
    (tmp_path / "binary.py").write_bytes(b"\x7fELF\x00\x01\x02")
    (tmp_path / "latin1.py").write_bytes(b"import torch\nname = '\xe9t\xe9'\n")
    (tmp_path / "declared.py").write_bytes(
        b"# -*- coding: latin-1 -*-\nimport torch\nd = torch.device('cuda')  # \xe9\n")
    (tmp_path / "loop").mkdir()
    os.symlink("..", tmp_path / "loop" / "up")
    os.symlink("missing.py", tmp_path / "dangling.py")
    report = analyze.analyze([str(tmp_path), str(tmp_path / "nowhere")], sp)
    skipped = {os.path.relpath(s["file"], tmp_path): (s["line"], s["reason"])
               for s in report.skipped}
    assert skipped["broken.py"][0] == 2 and skipped["broken.py"][1].startswith("does not parse")
    assert skipped["binary.py"][1].startswith("a binary file")
    assert skipped["latin1.py"] == (2, "not valid utf-8 (byte 0xe9)")
    assert skipped[os.path.join("loop", "up")][1].startswith("a symbolic link (to ..): not "
                                                             "followed")
    assert skipped["dangling.py"][1] == "a broken symbolic link"
    assert skipped["nowhere"][1] == "no such file or directory"
    assert len(skipped) == 6
    # The readable files are scanned all the same.
    assert {(os.path.basename(f.file), f.line, f.api) for f in report.findings} == {
        ("good.py", 1, "torch_npu"), ("good.py", 2, "torch.cuda.synchronize"),
        ("declared.py", 2, "torch_npu"), ("declared.py", 3, "torch.device")}
    assert report.files == 2


def test_code_nested_deeper_than_recursion_allows(sp, tmp_path):
    """Machine-written code (a sum of 900 terms nests 900 deep) and
    strings that are not text (a lone surrogate) are scanned like any."""
    (tmp_path / "generated.py").write_text(
        "x = 1" + " + 1" * 900 + "\nimport torch\ny = torch.zeros(1, device='cuda')\n"
        "s = '\\ud800'\nif s == '\\ud800nccl':\n    pass\n", encoding="utf-8")
    report = analyze.analyze([str(tmp_path)], sp)
    assert not report.skipped
    assert found(report) == [(2, "change", "import", "torch_npu"),
                             (3, "change", "device_arg", "torch.zeros")]


def test_generated_tree_and_speed(sp, tmp_path):
    """A few hundred files: every finding where the generator put it, and
    the scan at 10,000 lines per second or more (CPU time, so that the
    machine's other work does not decide it)."""
    paths = static_trees.generate(tmp_path, 300)
    cpu = time.process_time()
    report = analyze.analyze([str(tmp_path)], sp)
    cpu = time.process_time() - cpu
    assert report.files == 300 + 15 and not report.skipped  # with the packages' __init__.py
    for i, path in enumerate(paths):
        assert found(report, path) == static_trees.expected(i), path
    assert report.lines / cpu >= 10_000, f"{report.lines / cpu:.0f} lines/s"


def test_device_and_backend_strings_are_the_c_parsers():
    """The static tools judge strings with the runtime's own parser."""
    from transfer_to_npu import _C

    assert [_C.npu_device_string(s) for s in ("cuda", "cuda:0", "cuda:12", "npu", "cudax",
                                              "/ckpt/cuda_run", "cuda_graph.pt")] == \
        ["npu", "npu:0", "npu:12", None, None, None, None]
    for bad in ("cuda:x", "cuda:01", "cuda:", "cuda:128"):
        with pytest.raises(ValueError, match="Invalid device string"):
            _C.npu_device_string(bad)
    assert [_C.hccl_backend_string(s) for s in ("nccl", "NCCL", "gloo", "cpu:gloo,cuda:nccl",
                                                "tcp://nccl-host:1")] == \
        ["hccl", "hccl", None, "cpu:gloo,npu:hccl", None]
    with pytest.raises(TypeError, match="spec must be a str, got 3"):
        _C.npu_device_string(3)
    with pytest.raises(TypeError, match="spec must be a str"):
        _C.hccl_backend_string(None)


# --- what a CUDA code base holds besides torch.cuda -----------------------------

def test_cuda_only_imports_environment_mocks_and_data_parallel(sp, tmp_path):
    """Compiled CUDA extensions and CUDA-only packages (one list with the
    runtime's refusal), names imported from torch.cuda's modules that the
    NPU lacks, writes of CUDA's environment variables, mock targets and
    nn.DataParallel: each found, each at its lines."""
    write(tmp_path, {"train.py": """\
        import os
        import amp_C
        import fused_adam_cuda, flash_attn_2_cuda
        import cutlass
        from cuda.bindings import driver
        import cudnn
        from torch.cuda.nvtx import range_push
        from unittest import mock
        import torch
        os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
        os.environ.setdefault("NCCL_BUFFSIZE", "4194304")
        os.environ.update({"NCCL_DEBUG": "INFO"})
        @mock.patch("torch.cuda.is_available", return_value=True)
        def check(available):
            model = torch.nn.DataParallel(
                torch.nn.Linear(2, 2),
                device_ids=[0, 1])
            return torch.cuda.is_available()
    """})
    report = analyze.analyze([str(tmp_path)], sp)
    rows = {(f.line, f.end_line, f.category, f.kind, f.api) for f in report.findings}
    assert {
        (2, 2, "cuda_op", "extension", "amp_C"),
        (3, 3, "cuda_op", "extension", "fused_adam_cuda"),
        (3, 3, "cuda_op", "extension", "flash_attn_2_cuda"),
        (4, 4, "cuda_op", "package", "cutlass"),
        (5, 5, "cuda_op", "package", "cuda.bindings"),
        (6, 6, "cuda_op", "package", "cudnn"),
        (7, 7, "unsupported", "hand_edit", "torch.cuda.nvtx"),
        (10, 10, "change", "environment", "CUDA_VISIBLE_DEVICES"),
        (11, 11, "unsupported", "hand_edit", "NCCL_BUFFSIZE"),
        (12, 12, "unsupported", "unsupported", "NCCL_DEBUG"),
        (13, 13, "change", "patch_target", "torch.cuda.is_available"),
        (15, 17, "unsupported", "hand_edit", "torch.nn.DataParallel"),
    } <= rows
    by_api = {f.api: f for f in report.findings}
    assert by_api["CUDA_VISIBLE_DEVICES"].result == \
        'os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0,1"'
    assert "HCCL_BUFFSIZE" in by_api["NCCL_BUFFSIZE"].result and \
        "in MB" in by_api["NCCL_BUFFSIZE"].result
    patch = next(f for f in report.findings if f.kind == "patch_target")
    assert patch.result == 'mock.patch("torch.npu.is_available", return_value=True)'
    # The runtime refuses the same extensions, from the same list.
    from transfer_to_npu import _cuda_only, _served

    assert _served.EXTENSIONS is _cuda_only.EXTENSIONS
    assert {"amp_C", "fused_adam_cuda", "flash_attn_2_cuda", "mlp_cuda"} <= set(
        _served.EXTENSIONS)


def test_reasons_in_words_and_no_false_positives(sp, tmp_path):
    """What only the runtime answers says so in words; a call that spells
    no CUDA (set_float32_matmul_precision) is not a finding; a deprecated
    torch name (dist.reduce_op) is read without its warning."""
    write(tmp_path, {"probe.py": """\
        import torch
        import torch.distributed as dist
        version = torch._C._nccl_version()
        capturing = torch.cuda.is_current_stream_capturing
        torch.set_float32_matmul_precision("high")
        op = dist.reduce_op.SUM
    """})
    proc = run_python(["-W", "default", "-m", "transfer_to_npu", "analyze", str(tmp_path),
                       "--output", str(tmp_path / "out")])
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr
    report = analyze.analyze([str(tmp_path)], sp)
    reasons = {f.api: f.result for f in report.findings if f.kind == "runtime_only"}
    assert reasons == {
        "torch._C._nccl_version": "no NPU spelling of it: migrated at run time, it answers "
                                  "NCCL 2.18.1",
        "torch.cuda.is_current_stream_capturing":
            "no NPU spelling of it: migrated at run time, it answers False (nothing is "
            "captured on the npu)"}
    assert not [f for f in report.findings if f.line == 5]


def test_a_missing_path_is_an_error(tmp_path):
    (tmp_path / "train.py").write_text("import torch\n")
    proc = run_python(["-m", "transfer_to_npu", "analyze", str(tmp_path / "train.py"),
                       str(tmp_path / "trian.py")])
    assert proc.returncode == 2
    assert "trian.py" in proc.stderr and "does not exist" in proc.stderr


def test_advice_for_the_target_release(tmp_path):
    """Fused operators the target torch_npu has, where they fit what the
    code computes by hand, and dtypes the NPU handles otherwise where they
    decide what trains: the advice list, what saves most first, by the
    served torch_npu or by a release's names (--torch-npu)."""
    write(tmp_path, {"model.py": """\
        import torch
        import torch.nn.functional as F
        def rotate_half(x):
            return torch.cat((-x[..., 1:], x[..., :1]), dim=-1)
        class RMSNorm(torch.nn.Module):
            def forward(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        def mlp(x, w1, w2):
            return F.silu(w1(x)) * w2(x)
        def attend(q, k, v):
            return F.softmax(q @ k.transpose(-2, -1) / 8, dim=-1) @ v
        opt = torch.optim.AdamW([torch.zeros(1)], lr=1e-3)
        big = torch.zeros(2, dtype=torch.float64, device="cuda")
        fast = torch.optim.AdamW([torch.zeros(1)], fused=True)
        table = {"half": torch.float16, "double": torch.float64}
        with torch.autocast("cuda", dtype=torch.float16):
            pass
    """, "fused.py": """\
        import torch
        import torch.nn.functional as F
        def fused(q, k, v, x):
            y = x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6)
            scores = F.softmax(q @ k.transpose(-2, -1), dim=-1)  # the fallback
            return F.scaled_dot_product_attention(q, k, v), torch.nn.RMSNorm(8)(y)
    """, "scaled.py": """\
        import torch
        scaler = torch.amp.GradScaler()
        with torch.autocast("cuda", dtype=torch.float16):
            pass
    """, "tests/test_model.py": """\
        import torch
        opt = torch.optim.SGD([torch.zeros(1)], lr=0.1)
    """})
    sp_served = analyze.spellings()
    report = analyze.analyze([str(tmp_path)], sp_served)
    advice = [(f.line, f.kind, f.api) for f in report.findings if f.category == "advice"]
    assert sorted(advice) == [
        (3, "affinity", "torch_npu.npu_rotary_mul"), (7, "affinity", "torch_npu.npu_rms_norm"),
        (9, "affinity", "torch_npu.npu_swiglu"), (11, "affinity", "torch_npu.npu_fusion_attention"),
        (12, "affinity", "torch_npu.optim.NpuFusedAdamW"), (13, "precision", "torch.float64"),
        (16, "precision", "torch.float16")]
    # Ranked by what it saves: attention first, dtypes last.
    assert [r["line"] for r in report.rows("advice")] == [11, 7, 3, 9, 12, 13, 16]
    assert report.hand_work() == []  # advice is not work to do
    # A release's own names: its operators are known, its optimizers not.
    old = analyze.analyze([str(tmp_path)], analyze.spellings("2.1"))
    assert {(f.line, f.api) for f in old.findings if f.category == "advice"} == \
        {(a[0], a[2]) for a in advice} - {(12, "torch_npu.optim.NpuFusedAdamW")}
    out = tmp_path / "out"
    old.write(out)
    with open(out / "advice_list.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows and set(rows[0]) == {"file", "line", "end_line", "column", "kind", "api", "code",
                                     "advice", "suggestion"}


def test_target_release(tmp_path):
    """--torch-npu V: what that torch_npu release has decides what
    converts (torch.cuda.get_per_process_memory_fraction exists in
    torch_npu from 2.9 on)."""
    write(tmp_path, {"mem.py": """\
        import torch
        share = torch.cuda.get_per_process_memory_fraction()
    """})
    new = analyze.analyze([str(tmp_path)], analyze.spellings("2.9"))
    old = analyze.analyze([str(tmp_path)], analyze.spellings("2.1"))
    assert [(f.category, f.result) for f in new.findings if f.line == 2] == [
        ("change", "torch.npu.get_per_process_memory_fraction")]
    assert [f.category for f in old.findings if f.line == 2] == ["unsupported"]
    proc = run_python(["-m", "transfer_to_npu", "analyze", "--torch-npu", "1.8", str(tmp_path)])
    assert proc.returncode == 2 and "--torch-npu" in proc.stderr and "1.8" in proc.stderr


def test_strays_of_one_display_are_one_finding(sp, tmp_path):
    """A test's table of where each parameter lives (litgpt's, 90 CUDA
    device strings in two dicts): one finding per table, not one per
    string."""
    write(tmp_path, {"expected.py": """\
        expected = {"wte": "cuda:0", "h.0": "cuda:0", "h.1": "cuda:1", "lm_head": "cuda:1"}
        single = "cuda:1"
    """})
    report = analyze.analyze([str(tmp_path)], sp)
    assert [(f.line, f.api, f.result) for f in report.findings] == [
        (1, "device string", "4 CUDA device strings outside a device argument: not rewritten"),
        (2, "device string", "a CUDA device string outside a device argument: not rewritten")]
