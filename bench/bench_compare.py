"""A whole compare (docs/accuracy.md) against one plain run of the same
script: `python -m transfer_to_npu compare --output OUT -- script.py`
(the reference on the host and the migrated run, each dumped, at once,
then their comparison and its files) against `python -m transfer_to_npu
script.py`, in wall time, which is what the user waits for.  Budget: 2x.

Scripts: tests/data/nanogpt/train.py (nanoGPT's shape, tiny: the runs'
start dominates) and examples/train_cnn.py (the quick-start CNN, 500
steps: computing dominates), fully dumped and with --dump-steps 0-4.

The plain run's time is the faster of torch's default threads and one
thread: on a loaded machine torch's threads can make it slower (they spin
while the other processes run), which would flatter the compare; each
compare run gets half the threads.  Rounds alternate the settings; each
figure is the median of BENCH_ROUNDS (3).
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SCRIPTS = (("nanoGPT-shaped train.py", ROOT / "tests" / "data" / "nanogpt" / "train.py", []),
           ("quick-start CNN, 500 steps", ROOT / "examples" / "train_cnn.py", []),
           ("quick-start CNN, --dump-steps 0-4", ROOT / "examples" / "train_cnn.py",
            ["--dump-steps", "0-4"]))


def _timed(argv, env=None):
    full = dict(os.environ)
    full.pop("TRANSFER_TO_NPU", None)
    full.update(env or {})
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *argv], env=full, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed ({proc.returncode}):\n"
                         f"{proc.stderr[-2000:]}")
    return took


def main():
    print(f"compare against a plain run (wall seconds, median of {ROUNDS} rounds; "
          f"{os.cpu_count()} cores):")
    with tempfile.TemporaryDirectory() as tmp:
        for label, script, options in SCRIPTS:
            times = {"plain": [], "plain, 1 thread": [], "compare": []}
            for r in range(ROUNDS):
                order = list(times) if r % 2 == 0 else list(reversed(times))
                for what in order:
                    if what == "compare":
                        out = Path(tmp) / "out"
                        shutil.rmtree(out, ignore_errors=True)
                        argv = ["-m", "transfer_to_npu", "compare", "--output", str(out),
                                *options, "--", str(script)]
                        times[what].append(_timed(argv))
                    else:
                        env = {"OMP_NUM_THREADS": "1"} if "1 thread" in what else None
                        times[what].append(_timed(["-m", "transfer_to_npu", str(script)], env))
            plain = min(statistics.median(times["plain"]),
                        statistics.median(times["plain, 1 thread"]))
            compare = statistics.median(times["compare"])
            print(f"  {label:<36} plain {plain:6.1f} s  (default threads "
                  f"{statistics.median(times['plain']):.1f}, one {statistics.median(times['plain, 1 thread']):.1f})"
                  f"  compare {compare:6.1f} s  {compare / plain:4.2f}x")
    print("  (budget: 2.00x)")


if __name__ == "__main__":
    main()
