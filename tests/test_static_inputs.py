"""The static tools on trees and files built to hurt them: links that lead
out of the tree or multiply its paths, files that would make a pattern
backtrack, names that are not UTF-8.  Each is read once, in linear time, or
reported; nothing outside the tree is read."""
import json
import os
import time

import pytest

from conftest import run_python

from transfer_to_npu.static import analyze, convert, sources

# On the torch line of `make test` only: the static tools read source, whatever torch runs.
pytestmark = pytest.mark.main_line


@pytest.fixture(scope="module")
def sp():
    return analyze.spellings()


def test_links_are_reported_never_followed(sp, tmp_path):
    """23 directories, each with two links to the next: 2**22 paths if
    links were followed, 23 files read once here.  A link out of the tree
    is listed, what it points at never read."""
    root = tmp_path / "tree"
    for i in range(23):
        d = root / f"d{i:02d}"
        d.mkdir(parents=True)
        (d / "m.py").write_text("import torch\ntorch.cuda.synchronize()\n")
        if i < 22:
            os.symlink(f"../d{i + 1:02d}", d / "a")
            os.symlink(f"../d{i + 1:02d}", d / "b")
    outside = tmp_path / "outside.py"
    outside.write_text("import torch\nx = torch.zeros(1, device='cuda')\n")
    os.symlink(outside, root / "out.py")
    os.symlink(root / "d00" / "m.py", root / "again.py")
    cpu = time.process_time()
    report = analyze.analyze([str(root)], sp)
    assert time.process_time() - cpu < 10
    assert report.files == 23
    assert sorted({os.path.relpath(f.file, root) for f in report.findings}) == \
        [os.path.join(f"d{i:02d}", "m.py") for i in range(23)]
    reasons = {os.path.relpath(s["file"], root): s["reason"] for s in report.skipped}
    assert len(reasons) == 2 * 22 + 2
    assert reasons["out.py"] == f"a symbolic link out of the tree (to {outside}): not followed"
    assert reasons[os.path.join("d00", "a")].startswith("a symbolic link (to ../d01)")
    assert reasons["again.py"].startswith("a symbolic link")
    # convert copies links as links.
    dst = tmp_path / "dst"
    convert.convert(str(root), str(dst), spellings_=sp)
    assert os.readlink(dst / "out.py") == str(outside)
    assert os.readlink(dst / "d00" / "a") == "../d01"
    assert len(list(dst.rglob("m.py"))) == 23


@pytest.mark.parametrize("name,data", [
    ("kernel.cu", b"__global__ " + b"a" * 100_000),
    ("many.cu", b"__global__ , " * 20_000 + b" " * 50_000 + b"("),
    ("bounds.cu", b"__launch_bounds__(" * 30_000),
    ("blank.h", b"\n" * 300_000 + b"x"),
    ("include.h", b"#include <cuda" + b"a" * 100_000),
    ("includes.cpp", b"#   include   <cuda_runtime.h\n" * 20_000),
    ("percent.py", b"import torch\nd = torch.device('%" + b"0" * 100_000 + b"x' % 1)\n"),
    ("format.py", b"import torch\nd = torch.device('" + b"{" * 50_000 + b"'.format(1))\n"),
    ("wide.py", "import torch\nx = '\u00e9'; ".encode() + b"torch.cuda.synchronize(); " * 4_000
     + b"\n"),
])
def test_files_are_read_in_linear_time(sp, tmp_path, name, data):
    """Files of 100 KB or more that made a pattern backtrack over them (a
    `__global__` with no parenthesis after it, blank lines before an
    #include) or a finding re-read its line: each read in well under a
    second a 100 KB now."""
    (tmp_path / name).write_bytes(data)
    cpu = time.process_time()
    report = analyze.analyze([str(tmp_path)], sp)
    assert time.process_time() - cpu < 5, name
    assert not [s for s in report.skipped if "tool failed" in s["reason"]]
    if name == "wide.py":
        assert len([f for f in report.findings if f.api == "torch.cuda.synchronize"]) == 4_000
        cpu = time.process_time()
        convert.convert(str(tmp_path), str(tmp_path.parent / (tmp_path.name + "-dst")),
                        spellings_=sp)
        assert time.process_time() - cpu < 5


def test_kernels_found_as_before():
    """The linear kernel finder reads what the pattern it replaces read."""
    found = sources.cuda_code(b"#include <cuda.h>\n__global__ void k(int a) {}\n"
                              b"__global__ __launch_bounds__(128, 2) void\n  fused (float *x);\n"
                              b"__global__ ;\n__global__ int\tx_1 ( )\n")
    assert found == [(1, "#include <cuda.h>"), (2, "kernel k"), (3, "kernel fused"),
                     (6, "kernel x_1")]


def test_names_that_are_not_utf8(tmp_path):
    """A GBK file name (from a Windows archive): analyze and convert read
    the file and write their reports, the name shown with its bytes
    escaped; convert writes the copy under the same name."""
    root = os.fsencode(tmp_path / "src")
    os.mkdir(root)
    name = "训练".encode("gbk") + b".py"
    with open(os.path.join(root, name), "wb") as f:
        f.write(b"import torch\ntorch.cuda.synchronize()\n")
    with open(os.path.join(root, b"\xb2\xe2.cu"), "wb") as f:
        f.write(b"__global__ void k() {}\n")
    src, out = os.fsdecode(root), str(tmp_path / "out")
    proc = run_python(["-m", "transfer_to_npu", "analyze", src, "--output", out])
    assert proc.returncode == 0, proc.stderr
    shown = name.decode("utf-8", "backslashreplace")  # what is UTF-8 in it shown as such
    assert "\\x" in shown
    data = json.loads(open(os.path.join(out, "migration_report.json"), encoding="utf-8").read())
    assert [os.path.basename(r["file"]) for r in data["change_list"]] == [shown, shown]
    assert os.path.basename(data["cuda_op_list"][0]["file"]) == "\\xb2\\xe2.cu"
    dst = str(tmp_path / "dst")
    proc = run_python(["-m", "transfer_to_npu", "convert", src, dst])
    # The CUDA kernel is left to port.
    assert proc.returncode == 1 and "1 place left as written in 1 file" in proc.stderr, \
        proc.stderr
    with open(os.path.join(os.fsencode(dst), name), "rb") as f:
        assert f.read() == b"import torch\nimport torch_npu\ntorch.npu.synchronize()\n"
    data = json.loads(open(os.path.join(dst, "migration_report", "migration_report.json"),
                           encoding="utf-8").read())
    assert {os.path.basename(r["file"]) for r in data["change_list"]} == {shown}
