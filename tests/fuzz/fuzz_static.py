"""atheris target: the static tools (analyze, convert) on a source tree built
from the fuzzer's bytes: a Python file of CUDA spellings, Python syntax,
line endings and stray text, under a name that may not be UTF-8, beside a
CUDA source and a link.  Properties checked on each input:

* neither tool raises, and no file is skipped for the tool's own failure
  ("not scanned: the tool failed on it");
* a converted file parses, holds no string the original and the edits do
  not (an edit made twice, or at the wrong place), and converting it again
  changes nothing; a file skipped is its original with one line saying so;
* a file repeated to 64 KB (one input in eight) is scanned and converted
  within a bound that a quadratic pass over it would exceed by far.

    python tests/fuzz/fuzz_static.py -max_total_time=300 corpus/
"""
import ast
import io
import os
import shutil
import sys
import tempfile
import time
import tokenize

import atheris

import torch  # noqa: F401  (imported first: only the static tools are instrumented)
import transfer_to_npu  # noqa: F401

with atheris.instrument_imports(include=["transfer_to_npu"]):
    from transfer_to_npu.static import analyze, convert, rewrite, scan, sources

SP = analyze.spellings()
ROOT = tempfile.mkdtemp(prefix="fuzz_static_")

PIECES = [
    "import torch\n", "import torch as th\n", "import torch.distributed as dist\n",
    "from torch.cuda import amp, synchronize\n", "from torch.cuda.amp import autocast\n",
    "import torch.cuda as tc\n", "import flash_attn\n", "import amp_C\n", "import os\n",
    "from typing import TYPE_CHECKING\n", "if TYPE_CHECKING:\n    import torch\n",
    "device = 'cuda'\n", "device_type = 'cuda' if 'cuda' in device else 'cpu'\n",
    "x = torch.zeros(1, device='cuda:0')\n", "y = x.cuda()\n", "z = x.to(f'cuda:{i}')\n",
    "torch.cuda.synchronize()\n", "torch.backends.cuda.matmul.allow_tf32 = True\n",
    "s = torch.amp.GradScaler(\n  enabled=True,\n)\n", "dist.init_process_group('nccl')\n",
    "if x.device.type == 'cuda':\n    pass\n", "torch.cuda.nvtx.range_push('a')\n",
    "os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n", "m = torch.nn.DataParallel(m)\n",
    "@torch.no_grad()\ndef f(d='cuda'):\n    return d.startswith('cuda')\n",
    "class A:\n    def g(self):\n        torch.cuda.empty_cache()\n",
    "a = 1; torch.cuda.synchronize()\n", "if x: torch.cuda.synchronize()\n",
    "s = '''\nabc''' ; torch.cuda.synchronize()\n", "t = 'cu' 'da'\n", "u = r'cuda'\n",
    "w = (torch\n  .cuda\n  .synchronize())\n", "v = x \\\n  .cuda()\n",
    "# transfer_to_npu: a comment\n", "\n", "\r\n", "\r", "\t", " ", "\f", "\\\n", "é",
    "(", ")", "[", "]", ":", ";", ",", "'", '"', "#", "=", ".", "cuda", "nccl", "npu",
    "__global__ void k(", "#include <cuda.h>\n",
]


def source(data):
    parts = []
    for _ in range(data.ConsumeIntInRange(0, 24)):
        if data.ConsumeBool():
            parts.append(data.PickValueInList(PIECES))
        else:
            parts.append(data.ConsumeUnicodeNoSurrogates(data.ConsumeIntInRange(0, 8)))
    return "".join(parts)


def name(data):
    raw = data.ConsumeBytes(data.ConsumeIntInRange(0, 6))
    raw = bytes(b for b in raw if b not in (0, ord("/"))) or b"m"
    return raw + b".py"


def _strings(tree):
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


def _made(new):
    """The strings an edit's text may make: itself (a piece of an
    f-string) and each string literal in it."""
    out = {new}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(new).readline):
            if tok.type == tokenize.STRING:
                out.add(ast.literal_eval(tok.string))
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return out


def check_linear(text):
    """The text repeated to 64 KB: scanned and converted in bounded time."""
    if not text:
        return
    big = text * max(1, 65536 // len(text))
    cpu = time.process_time()
    try:
        tree = sources.parse_python(big, "big.py")
    except sources.SourceError:
        tree = None
    if tree is not None:
        findings = scan.scan(SP, big, tree)
        rewrite.apply(big, findings, tree)
    sources.cuda_code(big.encode("utf-8", "surrogatepass"))
    spent = time.process_time() - cpu
    if spent > 20:
        raise AssertionError(f"{spent:.1f} s for 64 KB: not linear")


_MARK = (rewrite.COMMENT + "not converted: ").encode()


def test_one_input(raw):
    data = atheris.FuzzedDataProvider(raw)
    linear = data.ConsumeIntInRange(0, 7) == 0
    text = source(data)
    fname = name(data)
    crlf = data.ConsumeIntInRange(0, 2)
    if crlf:
        text = text.replace("\n", "\r\n" if crlf == 1 else "\r")
    shutil.rmtree(ROOT, ignore_errors=True)
    src = os.path.join(os.fsencode(ROOT), b"src")
    os.makedirs(src)
    with open(os.path.join(src, fname), "wb") as f:
        f.write(text.encode("utf-8", "surrogatepass"))
    with open(os.path.join(src, b"k.cu"), "wb") as f:
        f.write(text.encode("utf-8", "surrogatepass"))
    os.symlink(b"..", os.path.join(src, b"up"))
    src = os.fsdecode(src)
    report = analyze.analyze([src], SP)
    for s in report.skipped:
        if "tool failed" in s["reason"]:
            raise AssertionError(s)
    once, twice = os.path.join(ROOT, "once"), os.path.join(ROOT, "twice")
    report = convert.convert(src, once, spellings_=SP)
    for s in report.skipped:
        if "tool failed" in s["reason"]:
            raise AssertionError(s)
    out = os.path.join(os.fsencode(once), fname)
    with open(out, "rb") as f:
        converted = f.read()
    original = text.encode("utf-8", "surrogatepass")
    if converted != original and _MARK in converted and _MARK not in original:
        # Skipped (it does not read as Python): copied with a line saying so.
        at = converted.index(_MARK)
        end = converted.find(b"\n", at) + 1 or converted.find(b"\r", at) + 1 or len(converted)
        if converted[:at] + converted[end:] not in (original, original + converted[end - 1:end]) \
                and converted[:at].rstrip(b"\r\n") + converted[end:] != original:
            raise AssertionError("a file skipped is not its original with one line added")
    elif converted != original:
        made = set()
        for f in report.findings:
            for e in f.edits:
                made |= _made(e[3])
        extra = _strings(ast.parse(converted)) - _strings(ast.parse(text)) - made
        if extra:
            raise AssertionError(f"strings no edit made: {extra}")
        convert.convert(once, twice, spellings_=SP)
        with open(os.path.join(os.fsencode(twice), fname), "rb") as f:
            if f.read() != converted:
                raise AssertionError("converting twice changed the file")
    if linear:
        check_linear(text)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
