"""The static tools' speed: analyze and convert of the same tree, CPU time
per 10,000 lines (the machine's other work moves CPU time less than wall
time), and convert's time against analyze's (budget: 2x).

The tree is torch's own torch/distributed (about 140,000 lines of real
code, with CUDA and NCCL spellings), read where torch is installed; convert
writes its copy to a temporary directory.  The mapping table is read once,
before the runs.
"""
import os
import shutil
import statistics
import sys
import tempfile
import time

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
BUDGET = 2.0


def main():
    import torch

    from transfer_to_npu.static import analyze, convert

    tree = os.path.join(os.path.dirname(torch.__file__), "distributed")
    sp = analyze.spellings()
    times = {"analyze": [], "convert": []}
    lines = 0
    for _ in range(RUNS):
        cpu = time.process_time()
        report = analyze.analyze([tree], sp)
        times["analyze"].append(time.process_time() - cpu)
        lines = report.lines
        out = tempfile.mkdtemp()
        try:
            cpu = time.process_time()
            convert.convert(tree, os.path.join(out, "dst"), spellings_=sp)
            times["convert"].append(time.process_time() - cpu)
        finally:
            shutil.rmtree(out)
    per = {tool: statistics.median(t) / lines * 10_000 for tool, t in times.items()}
    ratio = per["convert"] / per["analyze"]
    print(f"tree: torch/distributed of torch {torch.__version__}, {report.files} Python files, "
          f"{lines:,} lines")
    for tool in ("analyze", "convert"):
        print(f"{tool:<8} {per[tool] * 1000:7.0f} ms CPU per 10k lines "
              f"({statistics.median(times[tool]):.2f} s, median of {RUNS})")
    print(f"convert / analyze: {ratio:.2f} (budget {BUDGET})"
          + ("" if ratio <= BUDGET else "  OVER BUDGET"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
