"""python -m transfer_to_npu: run an unedited CUDA script migrated.

    python -m transfer_to_npu [--log N] [--log-file FILE] [--report FILE] script.py [args...]
    python -m transfer_to_npu [options] -m module [args...]
    python -m transfer_to_npu --list
    python -m transfer_to_npu analyze PATH... [--output DIR]   (static: see analyze.py)
    python -m transfer_to_npu convert SRC DST                  (static: see convert.py)

The script runs exactly as ``python script.py args...`` would run it (its
argv, ``__main__``, ``sys.path[0]``, exit code and traceback), with every
process it starts migrated too.
"""

import argparse
import os
import runpy
import sys


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m transfer_to_npu",
        description="Run a PyTorch script written for CUDA on the NPU, unedited.",
        usage="%(prog)s [options] (script.py | -m module | --list) [args ...]")
    p.add_argument("--log", type=int, choices=(0, 1, 2), metavar="N",
                   help="log mappings: 1 the first hit per call site, 2 every call "
                        "(TRANSFER_TO_NPU_LOG)")
    p.add_argument("--log-file", metavar="FILE", help="log there instead of stderr")
    p.add_argument("--report", metavar="FILE", help="write a JSON report at exit")
    p.add_argument("--backend", choices=("auto", "torch_npu", "virtual"),
                   help="TRANSFER_TO_NPU_BACKEND")
    p.add_argument("--list", action="store_true", help="print the mapping table and exit")
    p.add_argument("-m", dest="module", metavar="module", help="run a library module as a script")
    p.add_argument("target", nargs="?", help="the script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return p


def _print_table(stream=sys.stdout):
    import transfer_to_npu

    rows = transfer_to_npu.mappings()
    width = max(len(r["source"]) for r in rows)
    kind_width = max(len(r["kind"]) for r in rows)
    print(f"# {len(rows)} mappings, {transfer_to_npu.backend} backend", file=stream)
    for r in rows:
        print(f"{r['source']:<{width}}  {r['kind']:<{kind_width}}  {r['target']}", file=stream)


def _user_traceback(tb, filename):
    """The traceback from the first frame of the user's code on, as
    ``python script.py`` would show it."""
    start = tb
    while start is not None:
        code = start.tb_frame.f_code.co_filename
        if filename is not None and code == filename:
            return start
        if filename is None and code not in (__file__, runpy.__file__):
            return start
        start = start.tb_next
    return tb


# Subcommands that work on source code, before anything runs.
_TOOLS = {"analyze": "analyze", "convert": "convert"}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in _TOOLS:
        import importlib

        return importlib.import_module(f"{__package__}.{_TOOLS[argv[0]]}").main(argv[1:])
    # Options are ours up to the script (or -m module); the rest is its own.
    parser = _parser()
    opts = parser.parse_args(argv)
    if opts.module is not None and opts.target is not None:
        opts.args = [opts.target] + opts.args
        opts.target = None
    if not opts.list and opts.target is None and opts.module is None:
        parser.error("a script, -m module or --list is required")

    # The environment carries the settings to every process the script
    # starts: TRANSFER_TO_NPU=1 migrates them at their first torch import.
    os.environ["TRANSFER_TO_NPU"] = "1"
    if opts.log is not None:
        os.environ["TRANSFER_TO_NPU_LOG"] = str(opts.log)
    if opts.log_file is not None:
        os.environ["TRANSFER_TO_NPU_LOG_FILE"] = opts.log_file
    if opts.report is not None:
        os.environ["TRANSFER_TO_NPU_REPORT"] = opts.report
    if opts.backend is not None:
        os.environ["TRANSFER_TO_NPU_BACKEND"] = opts.backend

    import transfer_to_npu

    transfer_to_npu.enable()
    if opts.list:
        try:
            _print_table()
            sys.stdout.flush()
        except BrokenPipeError:
            # `--list | head`: the reader has gone, which is not an error.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0

    if opts.module is not None:
        sys.argv = [opts.module] + opts.args
        sys.path[0] = os.getcwd()
        filename = None
        run = lambda: runpy.run_module(opts.module, run_name="__main__", alter_sys=True)
    else:
        path = opts.target
        if not os.path.exists(path):
            print(f"{sys.executable}: can't open file {os.path.abspath(path)!r}: "
                  f"[Errno 2] No such file or directory", file=sys.stderr)
            return 2
        sys.argv = [path] + opts.args
        sys.path[0] = os.path.dirname(os.path.abspath(path))
        filename = path
        run = lambda: runpy.run_path(path, run_name="__main__")
    try:
        run()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        tb = _user_traceback(exc.__traceback__, filename)
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
