"""python -m transfer_to_npu convert: a migrated copy of a code base, with
every other byte kept, that trains on the virtual NPU as the migrated
original does."""
import ast
import json
import os
import pathlib
import re
import shutil
import textwrap

import pytest

import static_trees
from conftest import EXAMPLES, ROOT, run_python

from transfer_to_npu.static import analyze, convert, sources as _sources
from transfer_to_npu.static.text import split_lines

# On the torch line of `make test` only: convert reads and writes source, whatever torch
# runs (test_rehearsal.py runs converted code as on torch_npu on every line).
pytestmark = pytest.mark.main_line

SEEDS = ROOT / "tests" / "data" / "seeds"
COMMENT = "# transfer_to_npu: "


@pytest.fixture(scope="module")
def sp():
    return analyze.spellings()


def converted(sp, tmp_path, files):
    src, dst = tmp_path / "src", tmp_path / "dst"
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    report = convert.convert(str(src), str(dst), spellings_=sp)
    return dst, report


def test_converted_text(sp, tmp_path):
    dst, report = converted(sp, tmp_path, {"train.py": """\
        import os
        import torch  # the framework
        import torch.distributed as dist
        from torch.cuda.amp import autocast, GradScaler

        DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'


        def main(local_rank, ckpt="/runs/cuda_baseline/last.pt"):
            torch.cuda.set_device(local_rank)
            dist.init_process_group(backend="nccl", init_method="env://")
            model = Net().cuda(local_rank)
            state = torch.load(ckpt, map_location={"cuda:0": f"cuda:{local_rank}"})
            scaler = torch.amp.GradScaler()
            with autocast():
                out = model(torch.randn(2, 8,
                                        device=DEVICE))  # keeps its layout
            if out.is_cuda:
                torch.cuda.empty_cache()
            torch.cuda.nvtx.range_push("step")
            return out.to(f'cuda:{local_rank}', non_blocking=True)
    """})
    assert (dst / "train.py").read_text(encoding="utf-8") == textwrap.dedent("""\
        import os
        import torch  # the framework
        import torch_npu
        import torch.distributed as dist
        from torch.npu.amp import autocast, GradScaler

        DEVICE = 'npu' if torch.npu.is_available() else 'cpu'


        def main(local_rank, ckpt="/runs/cuda_baseline/last.pt"):
            torch.npu.set_device(local_rank)
            dist.init_process_group(backend="hccl", init_method="env://")
            model = Net().npu(local_rank)
            state = torch.load(ckpt, map_location={"npu:0": f"npu:{local_rank}"})
            scaler = torch.amp.GradScaler(device='npu')
            with autocast():
                out = model(torch.randn(2, 8,
                                        device=DEVICE))  # keeps its layout
            if out.is_npu:
                torch.npu.empty_cache()
            # transfer_to_npu: torch.cuda.nvtx.range_push: NVTX ranges annotate CUDA profiles; skipped
            torch.cuda.nvtx.range_push("step")
            return out.to(f'npu:{local_rank}', non_blocking=True)
    """)
    unsupported = report.rows("unsupported")
    assert [(r["line"], r["api"]) for r in unsupported] == [(20, "torch.cuda.nvtx.range_push")]
    assert (dst / "migration_report" / "unsupported_api.csv").exists()


def test_left_as_written_with_a_comment(sp, tmp_path):
    """What does not convert stays with a comment, and so does the test of
    the device that guards it: converted, the test would send the npu down
    the path that fails (flash_attn is not on an Ascend machine); as
    written, the npu takes the path a machine without a GPU takes."""
    dst, report = converted(sp, tmp_path, {"model.py": """\
        import torch
        import flash_attn
        from torch.cuda import synchronize, OutOfMemoryError


        class Attention(torch.nn.Module):
            @torch.no_grad()
            def forward(self, q):
                if q.device.type == 'cuda':
                    return flash_attn.flash_attn_func(q, q, q)
                return q
    """})
    text = (dst / "model.py").read_text(encoding="utf-8")
    assert text == textwrap.dedent(f"""\
        import torch
        import torch_npu
        {COMMENT}flash_attn: FlashAttention's CUDA kernels: no NPU build
        import flash_attn
        {COMMENT}torch.cuda: imports OutOfMemoryError, which the NPU module lacks
        from torch.cuda import synchronize, OutOfMemoryError


        class Attention(torch.nn.Module):
            @torch.no_grad()
            def forward(self, q):
                {COMMENT}device check: a test of the device, left as written with what it guards: flash_attn.flash_attn_func (line 10) stays as written (FlashAttention's CUDA kernels: no NPU build)
                if q.device.type == 'cuda':
                    {COMMENT}flash_attn.flash_attn_func: FlashAttention's CUDA kernels: no NPU build
                    return flash_attn.flash_attn_func(q, q, q)
                return q
    """)
    assert {(r["line"], r["kind"]) for r in report.rows("unsupported")} == {
        (3, "hand_edit"), (9, "hand_edit")}
    assert report.rows("change") == [r for r in report.rows("change") if r["line"] == 1]
    assert {(r["line"], r["kind"]) for r in report.rows("cuda_op")} == {
        (2, "package"), (10, "package_api")}


def _code_lines(text, original):
    """The lines of a converted file that came from the original: without
    the lines convert adds (an import of torch_npu only where the original
    has none)."""
    own_import = any(l.strip() == "import torch_npu" for l in original.splitlines())
    return [l for l in text.splitlines(keepends=True)
            if (own_import or l.strip() != "import torch_npu")
            and not l.lstrip().startswith(COMMENT)]


def test_every_other_byte_is_kept(sp, tmp_path):
    """The seeds and the examples: the copy parses, and differs from the
    original only on the lines with a change (plus the lines it adds);
    comments (Chinese ones too), quotes, CRLF line ends, a declared
    encoding, other files and links are as they were."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    shutil.copytree(EXAMPLES, src / "examples")
    shutil.copytree(SEEDS, src / "seeds")
    crlf = b"import torch\r\nx = torch.zeros(1, device='cuda')\r\n# end\r\n"
    (src / "crlf.py").write_bytes(crlf)
    latin = b"# -*- coding: latin-1 -*-\nimport torch\nd = torch.device('cuda')  # caf\xe9\n"
    (src / "latin.py").write_bytes(latin)
    (src / "data.bin").write_bytes(bytes(range(256)))
    (src / "notes.md").write_text("run with device cuda\n")
    os.symlink("examples/train_cnn.py", src / "train.py")
    report = convert.convert(str(src), str(dst), spellings_=sp)
    assert not report.skipped
    changed = {}  # the lines an edit was made on (an import bound anew changes no use)
    for f in report.findings:
        if f.api == "torch_npu":
            continue  # the import added, on a line of its own
        text = _sources.decode_python(pathlib.Path(f.file).read_bytes())
        for _, start, _, _ in f.edits:
            line = len(split_lines(text[:start]))
            changed.setdefault(os.path.relpath(f.file, src), set()).add(line)
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src)
        if path.is_symlink():
            continue
        original = path.read_bytes().decode("latin-1" if rel.name == "latin.py" else "utf-8")
        text = (dst / rel).read_bytes().decode("latin-1" if rel.name == "latin.py" else "utf-8")
        ast.parse(text)
        before, after = original.splitlines(keepends=True), _code_lines(text, original)
        assert len(after) == len(before), rel
        differ = {n for n, (a, b) in enumerate(zip(before, after), 1) if a != b}
        assert differ == changed.get(str(rel), set()), rel
    assert (dst / "crlf.py").read_bytes() == (
        b"import torch\r\nimport torch_npu\r\nx = torch.zeros(1, device='npu')\r\n# end\r\n")
    assert (dst / "latin.py").read_bytes() == (
        b"# -*- coding: latin-1 -*-\nimport torch\nimport torch_npu\n"
        b"d = torch.device('npu')  # caf\xe9\n")
    assert (dst / "data.bin").read_bytes() == bytes(range(256))
    assert (dst / "notes.md").read_text() == "run with device cuda\n"
    assert os.readlink(dst / "train.py") == "examples/train_cnn.py"
    cnn = (dst / "examples" / "train_cnn.py").read_text(encoding="utf-8")
    assert "# 初始化运行device\ndevice = torch.device('npu:0')\n" in cnn
    # Nothing the table maps is left: analyzing the copy finds no change.
    again = analyze.analyze([str(dst)], sp)
    assert [f for f in again.findings if f.category == "change"] == []


def test_where_it_writes(sp, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("import torch\n")
    with pytest.raises(ValueError, match="DST .* is inside SRC"):
        convert.convert(str(tmp_path / "src"), str(tmp_path / "src" / "out"), spellings_=sp)
    with pytest.raises(ValueError, match="DST .* is inside SRC"):
        convert.convert(str(tmp_path / "src"), str(tmp_path / "src"), spellings_=sp)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an empty directory: nothing is overwritten"):
        convert.convert(str(tmp_path / "src"), str(tmp_path / "full"), spellings_=sp)
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="--output .* is inside SRC"):
        convert.convert(str(tmp_path / "src"), str(tmp_path / "dst"),
                        str(tmp_path / "src" / "reports"), spellings_=sp)
    assert not (tmp_path / "dst").exists() and os.listdir(tmp_path / "src") == ["a.py"]
    with pytest.raises(ValueError, match="SRC .*nowhere.* does not exist"):
        convert.convert(str(tmp_path / "nowhere"), str(tmp_path / "out"), spellings_=sp)
    proc = run_python(["-m", "transfer_to_npu", "convert", str(tmp_path / "src"),
                       str(tmp_path / "src" / "sub")])
    assert proc.returncode == 2 and "is inside SRC" in proc.stderr
    # A single file: DST is the folder it goes to.
    proc = run_python(["-m", "transfer_to_npu", "convert", str(tmp_path / "src" / "a.py"),
                       str(tmp_path / "one")])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr  # complete: nothing said
    assert (tmp_path / "one" / "a.py").read_text() == "import torch\nimport torch_npu\n"
    assert (tmp_path / "one" / "migration_report" / "change_list.csv").exists()


def test_bad_files_are_copied_as_they_are(sp, tmp_path):
    dst, report = converted(sp, tmp_path, {"ok.py": "import torch\n",
                                           "broken.py": "import torch\nx = torch.device('cuda'\n"})
    (tmp_path / "src" / "bin.py").write_bytes(b"\x00\x01")
    shutil.rmtree(dst)
    report = convert.convert(str(tmp_path / "src"), str(dst), spellings_=sp)
    assert {os.path.basename(s["file"]) for s in report.skipped} == {"broken.py", "bin.py"}
    # Marked as not converted, at its top; a binary file as it is.
    assert (dst / "broken.py").read_text() == (
        f"{COMMENT}not converted: does not parse: '(' was never closed\n"
        "import torch\nx = torch.device('cuda'\n")
    assert (dst / "bin.py").read_bytes() == b"\x00\x01"
    assert (dst / "ok.py").read_text() == "import torch\nimport torch_npu\n"


def test_generated_tree(sp, tmp_path):
    """A few hundred files: each converted, each as analyze said."""
    src = tmp_path / "src"
    paths = static_trees.generate(src, 200)
    report = convert.convert(str(src), str(tmp_path / "dst"), spellings_=sp)
    assert report.files == 200 + 10 and not report.skipped
    for i, path in enumerate(paths):
        rel = path.relative_to(src)
        text = (tmp_path / "dst" / rel).read_text(encoding="utf-8")
        ast.parse(text)
        assert "torch.cuda.synchronize" not in text and "torch.npu.synchronize()" in text
        assert ('device="npu")' in text) and (f'torch.device("npu:{i % 8}")' in text)
        assert 'path="/data/cuda_' in text and 'cuda_kernel_name="cuda_fused"' in text
        assert ("range_push" in text) == (i % 10 == 0)
        assert (f"{COMMENT}torch.cuda.nvtx.range_push" in text) == (i % 10 == 0)
    assert sorted((f.file, f.line, f.category, f.kind, f.api) for f in report.findings) == \
        sorted((str(p), *e) for i, p in enumerate(paths) for e in static_trees.expected(i))


# --- the seed CNN, converted, on the virtual NPU ----------------------------------

LOSS = re.compile(r"^epoch (\d+) loss ([0-9.]+) outputs on (\S+)$", re.M)
MAPPING = re.compile(r"^transfer_to_npu: (.+?):(\d+): (.+)$", re.M)


def _small(text):
    """The seed CNN made quick to train (2 epochs of 320 images); the
    original, the converted copy and the baseline all get it."""
    for old, new in (("epochs = 10", "epochs = 2"), ("train_data = SyntheticMNIST()",
                                                     "train_data = SyntheticMNIST(n=320)")):
        assert text.count(old) == 1
        text = text.replace(old, new)
    return text


def _mapped(proc, path):
    """The mapping log's lines as (what was mapped, the line of the user's
    code it was mapped at)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return sorted((what, lines[int(n) - 1].strip())
                  for file, n, what in MAPPING.findall(proc.stderr))


@pytest.fixture(scope="module")
def cnn(tmp_path_factory, sp):
    """The seed CNN: the original migrated at run time, its converted copy,
    and the same script with no CUDA spelling at all (the device 'cpu')."""
    root = tmp_path_factory.mktemp("cnn")
    (root / "src").mkdir()
    source = _small((EXAMPLES / "train_cnn.py").read_text(encoding="utf-8"))
    (root / "src" / "train.py").write_text(source, encoding="utf-8")
    convert.convert(str(root / "src"), str(root / "converted"), spellings_=sp)
    assert source.count("torch.device('cuda:0')") == 1
    (root / "plain").mkdir()
    (root / "plain" / "train.py").write_text(
        source.replace("torch.device('cuda:0')", "torch.device('cpu')"), encoding="utf-8")
    env = {"TRANSFER_TO_NPU_BACKEND": "virtual", "TRANSFER_TO_NPU_LOG": "1"}
    runs = {}
    for name in ("src", "plain"):
        runs[name] = run_python(["-m", "transfer_to_npu", str(root / name / "train.py")],
                                cwd=root / name, env=env)
        assert runs[name].returncode == 0, runs[name].stderr
    return root, runs, env


def _check_converted_run(root, runs, proc, script):
    assert proc.returncode == 0, proc.stderr
    losses = LOSS.findall(proc.stdout)
    assert len(losses) == 2 and all(d == "npu:0" for _, _, d in losses)
    assert losses == LOSS.findall(runs["src"].stdout)  # the migrated original's, exactly
    # The runtime maps nothing of the script's own: what it still logs is
    # what it logs for the same script with no CUDA spelling in it (torch's
    # own calls of torch.cuda, from torch.manual_seed).
    assert _mapped(proc, script) == _mapped(runs["plain"], root / "plain" / "train.py")
    assert _mapped(runs["src"], root / "src" / "train.py") != _mapped(
        runs["plain"], root / "plain" / "train.py")


def test_converted_cnn_trains_as_the_migrated_original(cnn, tmp_path):
    """The converted copy, as written, run by the package's runner."""
    root, runs, env = cnn
    script = root / "converted" / "train.py"
    proc = run_python(["-m", "transfer_to_npu", str(script)], cwd=tmp_path, env=env)
    _check_converted_run(root, runs, proc, script)


def test_converted_cnn_trains_as_on_torch_npu(cnn, tmp_path):
    """The converted copy, as written, run as torch_npu would run it
    (--rehearse: nothing of CUDA's mapped): the conversion alone puts it on
    the npu, where it trains to the migrated original's losses."""
    root, runs, env = cnn
    script = root / "converted" / "train.py"
    proc = run_python(["-m", "transfer_to_npu", "--rehearse", str(script)], cwd=tmp_path,
                      env=env)
    assert proc.returncode == 0, proc.stderr
    losses = LOSS.findall(proc.stdout)
    assert len(losses) == 2 and all(d == "npu:0" for _, _, d in losses)
    assert losses == LOSS.findall(runs["src"].stdout)
    assert MAPPING.findall(proc.stderr) == []  # no mapping table


# --- nanoGPT's way of choosing the device -------------------------------------

NANOGPT = ROOT / "tests" / "data" / "nanogpt"
ITER = re.compile(r"^iter \d+: loss ([0-9.]+) on (\S+), device_type (\w+), "
                  r"activations (\S+), tf32 (\w+)$", re.M)


def test_converted_nanogpt_trains_with_autocast_and_needs_no_mapping(sp, tmp_path):
    """nanoGPT decides autocast, pinned batches and fused AdamW from
    `device_type = 'cuda' if 'cuda' in device else 'cpu'`: converted, the
    test is made the npu's with `device`, so the copy trains in bfloat16
    autocast with fused AdamW and pinned batches, as the migrated original
    does, and what the runtime still maps of it is torch's own use of
    torch.cuda (torch.manual_seed), at lines that spell no CUDA."""
    report = convert.convert(str(NANOGPT), str(tmp_path / "dst"), spellings_=sp)
    assert [f for f in report.findings if f.category not in ("change", "advice")] == []
    text = (tmp_path / "dst" / "train.py").read_text(encoding="utf-8")
    assert "device_type = 'npu' if 'npu' in device else 'cpu'" in text
    assert "torch.npu.matmul.allow_hf32 = True" in text
    assert "use_fused = fused_available and device_type == 'npu'" in \
        (tmp_path / "dst" / "model.py").read_text(encoding="utf-8")
    env = {"TRANSFER_TO_NPU_BACKEND": "virtual", "TRANSFER_TO_NPU_LOG": "1"}
    runs = {}
    for name, where in (("original", NANOGPT), ("converted", tmp_path / "dst")):
        runs[name] = run_python(["-m", "transfer_to_npu", "train.py"], cwd=where, env=env)
        assert runs[name].returncode == 0, runs[name].stderr
    iters = ITER.findall(runs["converted"].stdout)
    assert len(iters) == 3
    assert all(d == "npu:0" and t == "npu" and a == "torch.bfloat16" and tf == "True"
               for _, d, t, a, tf in iters)
    assert "using fused AdamW: True" in runs["converted"].stdout
    assert "pinned: True" in runs["converted"].stdout
    # The same training as the original migrated at run time.
    assert [i[0] for i in iters] == [i[0] for i in ITER.findall(runs["original"].stdout)]
    lines = text.splitlines()
    mapped = [(int(n), what) for file, n, what in MAPPING.findall(runs["converted"].stderr)
              if file.endswith("train.py") or file.endswith("model.py")]
    assert mapped, "torch.manual_seed's own torch.cuda call is still mapped"
    assert all("cuda" not in lines[n - 1] for n, _ in mapped), mapped
    assert len(MAPPING.findall(runs["original"].stderr)) > len(mapped) + 5


# --- converting twice, and what convert keeps ------------------------------------

def _tree_bytes(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and "migration_report" not in p.parts}


def test_converting_twice_changes_nothing(sp, tmp_path):
    """A converted copy converted again is byte for byte the same, comments
    included (none is added twice), and convert takes its own output as
    SRC without being told where the reports go."""
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES, src / "examples")
    shutil.copytree(SEEDS, src / "seeds")
    shutil.copytree(NANOGPT, src / "nanogpt")
    static_trees.generate(src / "generated", 30)
    convert.convert(str(src), str(tmp_path / "once"), spellings_=sp)
    proc = run_python(["-m", "transfer_to_npu", "convert", str(tmp_path / "once"),
                       str(tmp_path / "twice")])
    # What is left as written is left again: the copy is incomplete.
    assert proc.returncode == 1 and proc.stderr.startswith("convert: incomplete: "), proc.stderr
    once, twice = _tree_bytes(tmp_path / "once"), _tree_bytes(tmp_path / "twice")
    assert once.keys() == twice.keys()
    assert [k for k in once if once[k] != twice[k]] == []
    assert any(COMMENT.encode() in v for v in once.values())
    # The earlier copy's reports are not copied as code; the new ones replace them.
    data = json.loads((tmp_path / "twice" / "migration_report" / "migration_report.json")
                      .read_text(encoding="utf-8"))
    assert data["paths"] == [str(tmp_path / "once")] and data["change_list"] == []


def test_line_endings_and_where_the_import_goes(sp, tmp_path):
    """Bare CR line endings stay (the added lines end as the file's do);
    `import torch_npu` comes before the first use of the npu and where it
    runs: on torch's line after a ';', never under `if TYPE_CHECKING:`,
    and before an import that names torch.npu."""
    dst, _ = converted(sp, tmp_path, {
        "semicolon.py": "import torch; x = torch.zeros(1, device='cuda')\n",
        "checking.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                import torch
            else:
                import torch
            y = torch.ones(1).cuda()
        """,
        "from_cuda.py": "from torch.cuda import amp\nimport torch\n",
        "inline.py": "if True: import torch  # the framework\n",
    })
    assert (dst / "semicolon.py").read_text() == \
        "import torch; import torch_npu; x = torch.zeros(1, device='npu')\n"
    assert (dst / "checking.py").read_text() == textwrap.dedent("""\
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            import torch
        else:
            import torch
            import torch_npu
        y = torch.ones(1).npu()
    """)
    assert (dst / "from_cuda.py").read_text() == \
        "import torch_npu\nfrom torch.npu import amp\nimport torch\n"
    assert (dst / "inline.py").read_text() == \
        "if True: import torch; import torch_npu  # the framework\n"
    src = tmp_path / "cr"
    src.mkdir()
    (src / "cr.py").write_bytes(b"import torch\rx = torch.zeros(1, device='cuda')\r"
                                b"s = torch.amp.GradScaler(\r    enabled=True,\r)\r"
                                b"torch.cuda.nvtx.range_push('a')\r# end")
    (src / "mixed.py").write_bytes(b"import torch\r\ny = 'cuda'\nd = torch.device(y)\r")
    convert.convert(str(src), str(tmp_path / "cr_out"), spellings_=sp)
    assert (tmp_path / "cr_out" / "cr.py").read_bytes() == (
        b"import torch\rimport torch_npu\rx = torch.zeros(1, device='npu')\r"
        b"s = torch.amp.GradScaler(\r    enabled=True, device='npu',\r)\r"
        b"# transfer_to_npu: torch.cuda.nvtx.range_push: NVTX ranges annotate CUDA profiles; "
        b"skipped\rtorch.cuda.nvtx.range_push('a')\r# end")
    assert (tmp_path / "cr_out" / "mixed.py").read_bytes() == \
        b"import torch\r\nimport torch_npu\r\ny = 'npu'\nd = torch.device(y)\r"


def test_import_mode(sp, tmp_path):
    """--mode import: the one line of the migration at run time after
    torch's import, nothing else changed, nothing else reported."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("import os\nimport torch\nx = torch.ones(1).cuda()\n")
    (src / "util.py").write_text("import os\n")
    proc = run_python(["-m", "transfer_to_npu", "convert", "--mode", "import", str(src),
                       str(tmp_path / "dst")])
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "dst" / "train.py").read_text() == \
        "import os\nimport torch\nimport transfer_to_npu\nx = torch.ones(1).cuda()\n"
    assert (tmp_path / "dst" / "util.py").read_text() == "import os\n"
    data = json.loads((tmp_path / "dst" / "migration_report" / "migration_report.json")
                      .read_text(encoding="utf-8"))
    assert [(r["line"], r["api"]) for r in data["change_list"]] == [(2, "transfer_to_npu")]
    assert data["unsupported_api"] == data["cuda_op_list"] == []
    script = tmp_path / "dst" / "train.py"
    with open(script, "a") as f:
        f.write("print(x.device)\n")
    run = run_python([str(script)], env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert run.returncode == 0 and run.stdout.strip() == "npu:0", run.stderr


def test_an_edit_two_findings_make_is_made_once(sp, tmp_path):
    """A value that is both a device argument's and a key named for a
    device: one edit."""
    dst, report = converted(sp, tmp_path, {
        "load.py": 'import torch\nx = torch.load("a", map_location={"device": "cuda"})\n'})
    assert (dst / "load.py").read_text() == \
        'import torch\nimport torch_npu\nx = torch.load("a", map_location={"device": "npu"})\n'


# --- meaning: what the copy does on torch_npu as it is ---------------------------

def test_tests_of_the_device_converted_with_what_they_guard(sp, tmp_path):
    """A test of the device is converted with the code it guards, or
    neither is: each shape of test (if, conditional expression, skip
    decorator, early return, assert, flag, pytestmark) with what stops it
    (Lightning's accelerator, an API with no counterpart, a CUDA-only
    package, a function of the file that runs nvidia-smi), and the same
    tests converted where nothing stops them."""
    dst, report = converted(sp, tmp_path, {"guards.py": """\
        import subprocess
        import pytest
        import torch

        def accelerator():
            if torch.cuda.is_available():
                accelerator = "cuda"
            else:
                accelerator = "cpu"
            return accelerator

        def device():
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")

        @pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU")
        def test_graph():
            torch.cuda.CUDAGraph()

        @pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU")
        def test_sync():
            torch.cuda.synchronize()

        def links():
            if not torch.cuda.is_available():
                return None
            return smi()

        def smi():
            return subprocess.run(["nvidia-smi", "topo", "-m"])

        class Loader:
            def __init__(self):
                self.use_cuda = torch.cuda.is_available()

            def stream(self):
                if self.use_cuda:
                    return torch.cuda.nvtx.range_push("load")

        def kernel(x):
            assert x.is_cuda
            import flash_attn
            return flash_attn.flash_attn_func(x, x, x)
    """})
    text = (dst / "guards.py").read_text(encoding="utf-8")
    kept = [line.strip() for line in text.splitlines() if not line.lstrip().startswith("#")]
    for line in ('if torch.cuda.is_available():', 'accelerator = "cuda"',
                 'return torch.device("npu" if torch.npu.is_available() else "cpu")',
                 "torch.cuda.CUDAGraph()", "torch.npu.synchronize()",
                 "if not torch.cuda.is_available():", "self.use_cuda = torch.cuda.is_available()",
                 "assert x.is_cuda"):
        assert line in kept, line
    assert kept.count('@pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU")') == 1
    assert kept.count('@pytest.mark.skipif(not torch.npu.is_available(), reason="GPU")') == 1
    left = {(r["line"], r["api"]): r["reason"] for r in report.rows("unsupported")
            if r["kind"] == "hand_edit"}
    assert "accelerator='cuda' (line 7)" in left[(6, "torch.cuda.is_available")]
    assert "torch.cuda.CUDAGraph (line 17)" in left[(15, "torch.cuda.is_available")]
    assert "nvidia-smi (line 29)" in left[(24, "torch.cuda.is_available")]
    assert "torch.cuda.nvtx.range_push (line 37)" in left[(33, "torch.cuda.is_available")]
    assert "flash_attn (line 41)" in left[(40, "torch.Tensor.is_cuda")]
    # Nothing that converts under a test left as written is converted alone.
    assert {f.line for f in report.findings if f.category == "change"} == {3, 13, 19, 21}


def test_identity_questions_get_the_policys_answers(sp, tmp_path):
    """What CUDA code asks about the device, written as the runtime's
    identity policy answers it, in what torch_npu as it is has."""
    dst, report = converted(sp, tmp_path, {"ask.py": """\
        import torch
        major, minor = torch.cuda.get_device_capability(0)
        arch = torch.cuda.get_arch_list()
        if torch.version.cuda is not None and torch.version.cuda >= "11":
            bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
        memory = torch.cuda.get_device_properties(0).total_memory
        cores = torch.cuda.get_device_properties(0).multi_processor_count
        props = torch.cuda.get_device_properties("cuda")
        ampere = props.major >= 8 and props.minor == 0 and props.name != ""
        print(torch.cuda.get_device_properties(0))
    """})
    assert (dst / "ask.py").read_text(encoding="utf-8") == textwrap.dedent(f"""\
        import torch
        import torch_npu
        major, minor = (8, 0)
        arch = ['sm_80']
        if True and '12.1' >= "11":
            bf16 = torch.npu.is_bf16_supported()
        memory = torch.npu.get_device_properties(0).total_memory
        cores = torch.npu.get_device_properties(0).cube_core_num
        props = torch.npu.get_device_properties("npu")
        ampere = 8 >= 8 and 0 == 0 and props.name != ""
        {COMMENT}torch.cuda.get_device_properties: no NPU spelling of it: migrated at run time, it answers capability 8.0, the npu's name, memory and cores
        print(torch.cuda.get_device_properties(0))
    """)
    from transfer_to_npu._rules import identity

    assert identity.ANSWERED_CALLS["torch.cuda.get_device_capability"] == \
        repr(identity.CAPABILITY)


def test_patches_follow_the_code_they_patch(sp, tmp_path):
    """mock.patch and monkeypatch targets name what the code they patch
    calls once converted, in another file of the tree: converted with it,
    left with it; where the tree does both, the functions the code under
    the patch calls decide, else the patch is reported; a library's module
    stays."""
    dst, report = converted(sp, tmp_path, {
        "pkg/__init__.py": "",
        "pkg/util.py": """\
            import torch
            import flash_attn

            def count():
                return torch.cuda.device_count() or 1

            def fused(x):
                if torch.cuda.is_available() and torch.cuda.device_count() > 1:
                    return flash_attn.flash_attn_func(x, x, x)
                return x

            def where():
                return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        """,
        "tests/test_util.py": """\
            from unittest import mock
            import pytest
            import torch
            from pkg import util

            def test_count(monkeypatch):
                with mock.patch("pkg.util.torch.cuda.device_count", return_value=3):
                    assert util.count() == 3
                with mock.patch("lightning.fabric.accelerators.cuda.torch.cuda.device_count"):
                    pass

            @mock.patch("torch.cuda.is_available", return_value=False)
            def test_fused(available):
                assert util.fused(1) == 1

            def test_where(monkeypatch):
                monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
                assert util.where().type == "cpu"

            @pytest.fixture
            def gpu(monkeypatch):
                monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        """})
    text = (dst / "tests" / "test_util.py").read_text(encoding="utf-8")
    assert 'mock.patch("pkg.util.torch.npu.device_count", return_value=3)' in text
    assert 'mock.patch("lightning.fabric.accelerators.cuda.torch.cuda.device_count")' in text
    assert '@mock.patch("torch.cuda.is_available", return_value=False)' in text
    assert 'monkeypatch.setattr(torch.npu, "is_available", lambda: False)' in text
    assert 'monkeypatch.setattr(torch.cuda, "is_available", lambda: True)' in text
    mixed = [r for r in report.rows("unsupported") if r["file"].endswith("test_util.py")]
    assert [(r["line"], r["api"]) for r in mixed] == [(22, "torch.cuda.is_available")]
    assert "converted at" in mixed[0]["reason"] and "left as written at" in mixed[0]["reason"]


def test_environment_reads_follow_writes(sp, tmp_path):
    """CUDA's variables, wherever they are named: what the code writes is
    what it reads, the NPU's variable."""
    dst, _ = converted(sp, tmp_path, {"env.py": """\
        import os
        import subprocess
        os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
        if "CUDA_VISIBLE_DEVICES" in os.environ:
            subprocess.run(["python", "x.py"], env={"CUDA_VISIBLE_DEVICES": "1"})
        note = "set CUDA_VISIBLE_DEVICES=0 to use one GPU"
    """})
    text = (dst / "env.py").read_text(encoding="utf-8")
    assert text.count("ASCEND_RT_VISIBLE_DEVICES") == 4 and text.count("CUDA_VISIBLE_DEVICES") == 1


def test_recall_of_what_needs_a_port(sp, tmp_path):
    """Each CUDA dependency that no table row spells is found and listed."""
    write = {"recall.py": """\
        import importlib
        import os
        import subprocess
        import lightning as L
        from lightning.fabric.accelerators import CUDAAccelerator
        from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
        from causal_conv1d import causal_conv1d_fn
        from transformers import AutoModel
        import torch

        n = CUDAAccelerator.auto_device_count()
        fabric = L.Fabric(accelerator="gpu", devices=1)
        gpus = subprocess.check_output(["nvidia-smi", "--list-gpus"])
        os.system("nvcc --version")
        ln = importlib.import_module("fused_layer_norm_cuda")
        handles = torch.zeros(2).untyped_storage()._share_cuda_()
        optimizers = {"fusedadam": "apex.optimizers.FusedAdam",
                      "adamw8bit": "bitsandbytes.optim.AdamW8bit"}
        model = AutoModel.from_pretrained("m", attn_implementation="flash_attention_2")
    """}
    _, report = converted(sp, tmp_path, write)
    found = {(f.line, f.api) for f in report.findings
             if f.category in ("unsupported", "cuda_op")}
    assert {(11, "lightning.fabric.accelerators.CUDAAccelerator"),
            (12, "accelerator='gpu'"), (13, "nvidia-smi"), (14, "nvcc"),
            (6, "mamba_ssm.ops.selective_scan_interface"), (7, "causal_conv1d"),
            (15, "fused_layer_norm_cuda"), (16, "torch.UntypedStorage._share_cuda_"),
            (17, "apex.optimizers.FusedAdam"), (18, "bitsandbytes.optim.AdamW8bit"),
            (19, "attn_implementation='flash_attention_2'")} <= found


def test_exit_status_links_and_where_torch_npu_is_imported(sp, tmp_path):
    """convert exits 1 with one line when anything is left as written (0
    when the copy is complete: test_where_it_writes); a link into SRC
    points into DST; the
    torch_npu import never goes where a handler would swallow its absence;
    an attribute the code's own class sets keeps its name."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "ok.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    (src / "opt.py").write_text(textwrap.dedent("""\
        try:
            import torch
        except ImportError:
            torch = None

        class Loader:
            def __init__(self, device):
                self.is_cuda = device.type == "cuda"

            def first(self, x):
                return x.cuda() if self.is_cuda else x
    """))
    (src / "data").mkdir()
    os.symlink(src / "ok.py", src / "data" / "absolute.py")
    os.symlink("../ok.py", src / "data" / "relative.py")
    os.symlink(tmp_path / "elsewhere.txt", src / "data" / "outside.txt")
    (src / "left.py").write_text("import torch\ntorch.cuda.nvtx.range_push('a')\n")
    proc = run_python(["-m", "transfer_to_npu", "convert", str(src), str(tmp_path / "dst")])
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"convert: incomplete: 1 place left as written in 1 file (unsupported_api.csv, "
        f"cuda_op_list.csv); see {tmp_path / 'dst' / 'migration_report'}{os.sep}"]
    dst = tmp_path / "dst"
    assert os.readlink(dst / "data" / "absolute.py") == str(dst / "ok.py")
    assert os.readlink(dst / "data" / "relative.py") == "../ok.py"
    assert os.readlink(dst / "data" / "outside.txt") == str(tmp_path / "elsewhere.txt")
    assert (dst / "opt.py").read_text().startswith(
        "try:\n    import torch\nexcept ImportError:\n    torch = None\nimport torch_npu\n")
    assert "self.is_cuda = device.type == \"npu\"" in (dst / "opt.py").read_text()
    assert "if self.is_cuda else" in (dst / "opt.py").read_text()


def test_accelerator_names(sp, tmp_path):
    """accelerate's name for several GPUs becomes its NPU's (accelerate
    chooses the NPU itself on torch_npu); Lightning's CUDA accelerator has
    no NPU counterpart there: left with a comment and a report row, and so
    is the test that chooses it."""
    dst, report = converted(sp, tmp_path, {"run.py": """\
        import torch
        import lightning as L
        from accelerate.utils import DistributedType

        def launch(state, args):
            if state.distributed_type == DistributedType.MULTI_GPU:
                torch.cuda.synchronize()
            accelerator = "gpu" if torch.cuda.is_available() else "cpu"
            return L.Fabric(accelerator=accelerator, devices=args.devices)
    """})
    text = (dst / "run.py").read_text(encoding="utf-8")
    assert "if state.distributed_type == DistributedType.MULTI_NPU:" in text
    assert "torch.npu.synchronize()" in text
    assert 'accelerator = "gpu" if torch.cuda.is_available() else "cpu"' in text
    assert f"{COMMENT}accelerator='gpu': Lightning's CUDA accelerator" in text
    assert {(r["line"], r["kind"]) for r in report.rows("unsupported")} == {
        (8, "accelerator"), (8, "hand_edit")}
