"""python -m transfer_to_npu: run an unedited CUDA script migrated.

    python -m transfer_to_npu [--log N] [--log-file FILE] [--report FILE] script.py [args...]
    python -m transfer_to_npu [options] -m module [args...]
    python -m transfer_to_npu --rehearse script.py [args...]   (a converted copy, as on torch_npu)
    python -m transfer_to_npu --list [--torch-npu VERSION]
    python -m transfer_to_npu analyze PATH... [--output DIR]   (static/analyze.py)
    python -m transfer_to_npu convert SRC DST                  (static/convert.py)
    python -m transfer_to_npu [--dump DIR ...] script.py [args...]   (accuracy/dump.py)
    python -m transfer_to_npu compare ...                      (accuracy/compare.py)

The script runs exactly as ``python script.py args...`` would run it (its
argv, ``__main__``, ``sys.path[0]``, exit code and traceback), with every
process it starts migrated too.
"""

import argparse
import builtins
import importlib.machinery
import io
import os
import runpy
import sys
import types
import zipfile


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
    p.add_argument("--backend", choices=("auto", "torch_npu", "virtual", "cpu"),
                   help="TRANSFER_TO_NPU_BACKEND")
    p.add_argument("--dump", metavar="DIR", help="record each torch call's statistics there, "
                   "per step and rank (TRANSFER_TO_NPU_DUMP; docs/accuracy.md)")
    p.add_argument("--dump-steps", metavar="STEPS", help="with --dump: only these steps "
                   "(0-2,5)")
    p.add_argument("--dump-list", metavar="PATTERNS", help="with --dump: only calls whose name "
                   "matches one of these comma-separated patterns (Module.*,Functional.*)")
    p.add_argument("--dump-tensors", metavar="PATTERNS", help="with --dump: also keep the full "
                   "tensors of the calls matching these patterns")
    p.add_argument("--dump-seed", metavar="N", help="with --dump: seed random, numpy and torch "
                   "before the script, and draw the device's random numbers on the host, as "
                   "compare does for its runs (dumps made apart then draw alike)")
    p.add_argument("--dump-check", action="store_const", const="1", help="with --dump: run each "
                   "recorded call again on the host in float64 and judge it alone "
                   "(TRANSFER_TO_NPU_DUMP_CHECK=1)")
    p.add_argument("--rehearse", action="store_true",
                   help="run a converted copy as torch_npu would run it: the npu, torch_npu's "
                        "API, nothing of CUDA's mapped (TRANSFER_TO_NPU=rehearse)")
    p.add_argument("--list", action="store_true", help="print the mapping table and exit")
    p.add_argument("--torch-npu", metavar="VERSION",
                   help="with --list: the table torch_npu VERSION (a release line, such as "
                        "2.5) would get, from the names its release has")
    p.add_argument("-m", dest="module", metavar="module", help="run a library module as a script")
    p.add_argument("target", nargs="?", help="the script to run; what follows it (or the "
                   "module) is its own arguments")
    return p


def _print_table(rows, backend, stream=sys.stdout, note=""):
    width = max(len(r["source"]) for r in rows)
    kind_width = max(len(r["kind"]) for r in rows)
    print(f"# {len(rows)} mappings, {backend} backend{note}", file=stream)
    for r in rows:
        print(f"{r['source']:<{width}}  {r['kind']:<{kind_width}}  {r['target']}", file=stream)


def _run_script(path):
    """Run path as python runs a script: as __main__, with an absolute
    __file__ and sys.argv[0] as given (runpy.run_path would make both the
    path it is given).  A directory or a zip file goes to runpy."""
    if not os.path.isfile(path) or zipfile.is_zipfile(path):
        runpy.run_path(path, run_name="__main__")
        return
    filename = os.path.abspath(path)
    with io.open_code(filename) as f:
        source = f.read()
    # A dump watches the script's tests of device names (accuracy/branches.py).
    branches = sys.modules.get(f"{__package__}.accuracy.branches")
    code = branches.compile_user(source, filename) if branches is not None else \
        compile(source, filename, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=filename, __builtins__=builtins, __cached__=None,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", filename))
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        sys.modules["__main__"] = saved


def _run_module(name):
    """Run module name as `python -m name` runs it; one that cannot be run
    (none of that name, a package without __main__) ends the process with
    the line python prints, exit status 1, as runpy words it for python."""
    details, error = getattr(runpy, "_get_module_details", None), getattr(runpy, "_Error", None)
    if details is not None and error is not None:
        try:
            details(name, error)
        except error as exc:
            sys.exit(f"{sys.executable}: {exc}")
    runpy.run_module(name, run_name="__main__", alter_sys=True)


def _torch_version():
    import torch

    return torch.__version__


def _surface_table(version):
    """The table a torch_npu release would get (its names, from its
    surface file), with this torch; and the backend as named."""
    import torch

    from . import _environment, _rules, surfaces

    torch_npu, npu = surfaces.load(version)
    rows, _ = _rules.derive(torch, npu, torch_npu)
    # The environment's rows, installed before the others.
    rows = _environment.rows() + rows + _environment.backend_rows("torch_npu")
    return _rules.entries(rows), f"torch_npu {torch_npu.__version__}"


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


# Our options that take a value (as a separate argument, or after "=").
_VALUED = ("--log", "--log-file", "--report", "--backend", "--torch-npu", "--dump",
           "--dump-steps", "--dump-list", "--dump-tensors", "--dump-seed")

# --dump's options, and the variables that carry them to every process.
_DUMP_OPTIONS = (("dump", "TRANSFER_TO_NPU_DUMP"), ("dump_steps", "TRANSFER_TO_NPU_DUMP_STEPS"),
                 ("dump_list", "TRANSFER_TO_NPU_DUMP_LIST"),
                 ("dump_tensors", "TRANSFER_TO_NPU_DUMP_TENSORS"),
                 ("dump_seed", "TRANSFER_TO_NPU_DUMP_SEED"),
                 ("dump_check", "TRANSFER_TO_NPU_DUMP_CHECK"))


def _split(argv):
    """(our options, the script or -m module, its arguments): everything
    after the script or the module is the script's own, as with python
    itself (argparse would take `-m torch.distributed.run --nproc-per-node
    2` for options of ours)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return argv[:i], argv[i + 1:i + 2], argv[i + 2:]
        if arg == "-m":
            return argv[:i], argv[i:i + 2], argv[i + 2:]
        if arg.startswith("-m") and not arg.startswith("--"):
            return argv[:i], ["-m", arg[2:]], argv[i + 1:]
        if not arg.startswith("-") or arg == "-":
            return argv[:i], [arg], argv[i + 1:]
        i += 2 if arg in _VALUED else 1
    return argv, [], []


# Subcommands that work on source code, before anything runs.
_TOOLS = {"analyze": "static.analyze", "convert": "static.convert", "compare": "accuracy.compare"}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in _TOOLS:
        import importlib

        return importlib.import_module(f"{__package__}.{_TOOLS[argv[0]]}").main(argv[1:])
    ours, target, rest = _split(argv)
    parser = _parser()
    opts = parser.parse_args(ours + target)
    opts.args = rest
    if not opts.list and opts.target is None and opts.module is None:
        parser.error("a script, -m module or --list is required")
    if opts.torch_npu is not None and not opts.list:
        parser.error("--torch-npu goes with --list")
    for option, variable in _DUMP_OPTIONS[1:]:
        if getattr(opts, option) is not None and opts.dump is None:
            parser.error(f"--{option.replace('_', '-')} goes with --dump")
    if opts.rehearse and opts.list:
        parser.error("--rehearse runs a script: it maps nothing to --list")
    if opts.rehearse and opts.backend == "cpu":
        parser.error("--rehearse runs on the npu: --backend cpu has none")

    # The environment carries the settings to every process the script
    # starts: TRANSFER_TO_NPU=1 migrates them at their first torch import
    # (rehearse: runs them as on torch_npu).
    os.environ["TRANSFER_TO_NPU"] = "rehearse" if opts.rehearse else "1"
    if opts.log is not None:
        os.environ["TRANSFER_TO_NPU_LOG"] = str(opts.log)
    if opts.log_file is not None:
        os.environ["TRANSFER_TO_NPU_LOG_FILE"] = opts.log_file
    if opts.report is not None:
        os.environ["TRANSFER_TO_NPU_REPORT"] = opts.report
    if opts.backend is not None:
        os.environ["TRANSFER_TO_NPU_BACKEND"] = opts.backend
    for option, variable in _DUMP_OPTIONS:
        if getattr(opts, option) is not None:
            os.environ[variable] = getattr(opts, option)

    import transfer_to_npu

    if opts.list and opts.torch_npu is not None:
        try:
            table, backend = _surface_table(opts.torch_npu)
        except ValueError as exc:
            parser.error(f"--torch-npu: {exc}")
    elif opts.rehearse:
        transfer_to_npu.rehearse()
    else:
        transfer_to_npu.enable()
    if not opts.list and os.environ.get("TRANSFER_TO_NPU_DUMP"):
        from .accuracy import dump

        try:
            dump.start()
        except dump.DumpError as exc:
            parser.error(str(exc))
    if opts.list:
        if opts.torch_npu is None:
            table, backend = transfer_to_npu.mappings(), transfer_to_npu.backend
        try:
            _print_table(table, backend, note="" if opts.torch_npu is None else
                         f" (from the names of its release, with torch {_torch_version()})")
            sys.stdout.flush()
        except BrokenPipeError:
            # `--list | head`: the reader has gone, which is not an error.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0

    return run_target(opts.module, opts.target, opts.args)


def run_target(module, path, args):
    """Run ``-m module args`` or ``path args`` as python would (its argv,
    sys.path[0], its traceback); its exit status."""
    if module is not None:
        sys.argv = [module] + args
        sys.path[0] = os.getcwd()
        filename = None
        run = lambda: _run_module(module)
    else:
        if not os.path.exists(path):
            print(f"{sys.executable}: can't open file {os.path.abspath(path)!r}: "
                  f"[Errno 2] No such file or directory", file=sys.stderr)
            return 2
        sys.argv = [path] + args
        sys.path[0] = os.path.dirname(os.path.abspath(path))
        filename = os.path.abspath(path)
        run = lambda: _run_script(path)
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
