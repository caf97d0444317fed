"""make bench: run every bench/bench_*.py in its own interpreter, in name
order, and print what each reports.

    python bench/run.py               # all
    python bench/run.py overhead      # those whose name contains "overhead"
"""
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def main(argv):
    wanted = argv[1:]
    scripts = sorted(p for p in HERE.glob("bench_*.py")
                     if not wanted or any(w in p.stem for w in wanted))
    failed = 0
    for script in scripts:
        print(f"== {script.stem} ==", flush=True)
        proc = subprocess.run([sys.executable, str(script)], cwd=HERE.parent)
        if proc.returncode != 0:
            print(f"{script.stem} failed with exit code {proc.returncode}", flush=True)
            failed += 1
        print(flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
