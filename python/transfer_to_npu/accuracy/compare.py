"""python -m transfer_to_npu compare: two dumps matched call by call, and
where they first part (docs/accuracy.md).

    compare NPU_DIR BENCH_DIR --output OUT
    compare --output OUT [--reference auto|cpu|cuda] [--seed N] [--dump-...] -- script.py args
    compare --output OUT ... -- -m torch.distributed.run --nproc-per-node 2 train.py

The first side is the run under test (msprobe's "NPU"), the second the
reference ("Bench").  Outputs in OUT: compare_result.csv,
compare_result.json, summary.txt (printed), curves.png (with matplotlib).
The exit status is 0 when the calls match and nothing is an error.
"""

import argparse
import sys

from .dumps import CompareError
from .runs import run_script
from .summary import run

def _parser():
    p = argparse.ArgumentParser(
        prog="python -m transfer_to_npu compare",
        description="Compare two dumps, or run a script's reference and migrated runs and "
                    "compare them.",
        usage="%(prog)s NPU_DIR BENCH_DIR --output DIR\n"
              "       %(prog)s --output DIR [options] -- (script.py | -m module) [args ...]")
    p.add_argument("dumps", nargs="*", metavar="DIR",
                   help="two dumps: the run under test (NPU), then the reference (bench)")
    p.add_argument("--output", "-o", required=True, metavar="DIR",
                   help="where the results (and, with --, the dumps) go")
    p.add_argument("--reference", choices=("auto", "cpu", "cuda"), default="auto",
                   help="with --: where the reference runs (auto: CUDA when this machine has "
                        "a GPU, else the CPU)")
    p.add_argument("--seed", type=int, default=0,
                   help="with --: the seed both runs get before the script (default 0)")
    p.add_argument("--dump-steps", metavar="STEPS", help="with --: dump only these steps")
    p.add_argument("--dump-list", metavar="PATTERNS", help="with --: dump only these calls")
    p.add_argument("--dump-tensors", metavar="PATTERNS",
                   help="with --: keep the full tensors of these calls")
    return p


def main(argv):
    parser = _parser()
    if "--" in argv:
        at = argv.index("--")
        ours, target = argv[:at], argv[at + 1:]
    else:
        ours, target = argv, None
    opts = parser.parse_args(ours)
    if target is not None:
        if opts.dumps:
            parser.error("give two dumps, or a script after --, not both")
        if not target or target[0] == "-m" and len(target) < 2:
            parser.error("a script (or -m module) is needed after --")
        if opts.dump_steps:
            from .settings import DumpError, parse_steps

            try:
                parse_steps(opts.dump_steps, "--dump-steps")
            except DumpError as exc:
                parser.error(str(exc))
        try:
            return run_script(opts, target)
        except CompareError as exc:
            parser.error(str(exc))
    if len(opts.dumps) != 2:
        parser.error("two dumps are needed (NPU_DIR BENCH_DIR), or a script after --")
    try:
        return run(opts.dumps[0], opts.dumps[1], opts.output)
    except CompareError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
