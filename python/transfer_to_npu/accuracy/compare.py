"""python -m transfer_to_npu compare: a migrated run against its reference,
call by call, and where they first part (docs/accuracy.md).

    compare --output OUT [options] -- script.py args        run both, compare
    compare --output OUT --per-call -- script.py args       each call checked alone
    compare --output OUT ... -- -m torch.distributed.run --nproc-per-node 2 train.py
    compare NPU_DIR BENCH_DIR --output OUT                  two dumps
    compare DUMP_DIR --output OUT                           one dump's own checks

The first side is the run under test (msprobe's "NPU"), the second the
reference ("Bench").  Outputs in OUT: compare_result.csv,
compare_result.json, summary.txt (printed), curves.png (with matplotlib).
Exit status: 0 nothing differs beyond noise, 1 something differs, 2 a usage
error (before anything runs), 3 a run failed, 130 interrupted; the last
line printed says which.
"""

import argparse
import gc
import os
import sys

from . import reference, summary
from .dumps import CompareError, Dump

USAGE_ERROR = 2


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m transfer_to_npu compare",
        description="Run a script's reference and migrated runs and compare them, call by "
                    "call; or compare two dumps; or check one.",
        usage="%(prog)s --output DIR [options] -- (script.py | -m module) [args ...]\n"
              "       %(prog)s NPU_DIR [BENCH_DIR] --output DIR")
    p.add_argument("dumps", nargs="*", metavar="DIR",
                   help="two dumps: the run under test (NPU), then the reference (bench); or "
                        "one, for its own checks (the first inf/nan, the per-call check)")
    p.add_argument("--output", "-o", required=True, metavar="DIR",
                   help="where the results (and, with --, the dumps) go")
    p.add_argument("--reference", choices=("auto", "cpu", "cuda"), default="auto",
                   help="with --: where the reference runs (auto: CUDA when this machine has "
                        "a GPU, else the CPU)")
    p.add_argument("--reference-precision", choices=reference.CHOICES, default="policy",
                   help="with --: the reference keeps the script's autocast (policy, the "
                        "default) or computes in float32 (fp32)")
    p.add_argument("--per-call", action="store_true",
                   help="with --: no reference run; each call of the migrated run is run again "
                        "on the host, in float64, from the same inputs, and judged alone")
    p.add_argument("--sequential", action="store_true",
                   help="with --: run the reference, then the migrated run (by default they "
                        "run at once on a machine with two cores or more)")
    p.add_argument("--seed", type=int, default=0,
                   help="with --: the seed both runs get before the script (default 0)")
    p.add_argument("--dump-steps", metavar="STEPS", help="with --: dump only these steps")
    p.add_argument("--dump-list", metavar="PATTERNS", help="with --: dump only these calls")
    p.add_argument("--dump-tensors", metavar="PATTERNS",
                   help="with --: keep the full tensors of these calls")
    return p


def _usage_error(message):
    print(f"compare: error: {message}", file=sys.stderr)
    return USAGE_ERROR


def main(argv):
    # A compare reads millions of objects (the dumps' decoded JSON) and makes
    # rows of them, none in a reference cycle: the cyclic collector would
    # walk them again and again as they grow, for nothing (a quarter of the
    # time of a compare of the quick-start CNN's 500 steps).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _compare(argv)
    finally:
        if collecting:
            gc.enable()


def _compare(argv):
    parser = _parser()
    if "--" in argv:
        at = argv.index("--")
        ours, target = argv[:at], argv[at + 1:]
    else:
        ours, target = argv, None
    opts = parser.parse_args(ours)
    try:
        if target is not None:
            if opts.dumps:
                parser.error("give dumps, or a script after --, not both")
            if not target or target[0] == "-m" and len(target) < 2:
                parser.error("a script (or -m module) is needed after --")
            if opts.dump_steps:
                from .settings import DumpError, parse_steps

                try:
                    parse_steps(opts.dump_steps, "--dump-steps")
                except DumpError as exc:
                    parser.error(str(exc))
            from .runs import run_script

            report = run_script(opts, target)
        else:
            if len(opts.dumps) not in (1, 2):
                parser.error("one or two dumps are needed (NPU_DIR [BENCH_DIR]), or a script "
                             "after --")
            if os.path.exists(opts.output) and not os.path.isdir(opts.output):
                raise CompareError(f"--output {opts.output!r} is a file, not a directory")
            dumps = [Dump.load(d) for d in opts.dumps]
            report = summary.Report(dumps[0], dumps[1] if len(dumps) == 2 else None)
        return summary.show(report, os.path.abspath(opts.output), sys.stdout)
    except CompareError as exc:
        return _usage_error(str(exc))
    except KeyboardInterrupt:
        print("\ncompare: exit 130: interrupted", file=sys.stderr)
        return summary.INTERRUPTED
