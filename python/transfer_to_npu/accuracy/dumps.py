"""Reading a dump: its steps and ranks, each part's calls, call sites,
modules, scalars and per-call checks, and how each rank's run went."""

import functools
import json
import os
import re

_STEP = re.compile(r"^step(\d+)$")
_RANK = re.compile(r"^rank(\d+)$")
_RUN = re.compile(r"^rank(\d+)\.json$")
_COUNTER = re.compile(r"\.\d+(?=\.(?:forward|backward)$)|(?<=\.forward)\.\d+$|"
                      r"(?<=\.backward)\.\d+$")

#: A run's statuses that end it before the script's end.
ENDED_EARLY = ("failed", "interrupted", "killed")


class CompareError(Exception):
    """A compare that cannot be made: says why, naming the path."""


# --- reading dumps -------------------------------------------------------------

def _json(path, default):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return default


class Part:
    """One rank's step of a dump."""

    def __init__(self, place):
        self.place = place
        self.calls, self.stack, self.construct, self.scalars = [], {}, {}, []
        self.checks = {}
        self.problem = None
        # The kept tensors beside it (the dump may have been moved).
        self.tensor_dir = os.path.join(place, "dump_tensor_data")
        try:
            self.calls = list(_json(os.path.join(place, "dump.json"), {}).get("data", {}).items())
            for name in ("stack", "construct", "scalars"):
                setattr(self, name, _json(os.path.join(place, f"{name}.json"),
                                          getattr(self, name)))
            self.checks = _json(os.path.join(place, "check.json"), {})
        except (OSError, ValueError, AttributeError) as exc:
            self.problem = f"{place}: cannot be read ({exc})"
            self.calls = []


class Dump:
    """A dump directory: ``parts`` {(rank, step): Part} and ``runs`` {rank:
    how that rank's run went (outcome.py), or {} where it wrote none}."""

    def __init__(self, directory, parts, runs):
        self.directory, self.parts, self.runs = directory, parts, runs
        self.returncode = None  # the exit status of the process compare ran, if it ran one

    @classmethod
    def load(cls, directory, required=True):
        """The dump in directory; CompareError where there is none and one is
        required (given by the user; a run compare made may have failed
        before writing anything)."""
        if not os.path.isdir(directory):
            if required:
                raise CompareError(f"{directory}: not a directory")
            return cls(directory, {}, {})
        parts, runs = {}, {}
        for step_dir in os.listdir(directory):
            s = _STEP.match(step_dir)
            if not s or not os.path.isdir(os.path.join(directory, step_dir)):
                continue
            for rank_dir in os.listdir(os.path.join(directory, step_dir)):
                r = _RANK.match(rank_dir)
                place = os.path.join(directory, step_dir, rank_dir)
                if r and os.path.exists(os.path.join(place, "dump.json")):
                    parts[(int(r.group(1)), int(s.group(1)))] = Part(place)
        run_dir = os.path.join(directory, "run")
        if os.path.isdir(run_dir):
            for name in os.listdir(run_dir):
                r = _RUN.match(name)
                if r:
                    try:
                        runs[int(r.group(1))] = _json(os.path.join(run_dir, name), {})
                    except (OSError, ValueError):
                        runs[int(r.group(1))] = {}
        if not parts and not runs and required:
            raise CompareError(f"{directory}: no dump in it (step*/rank*/dump.json, as "
                               f"`python -m transfer_to_npu --dump {directory} ...` writes)")
        return cls(directory, parts, runs)

    def ranks(self):
        return sorted({r for r, _ in self.parts} | set(self.runs))

    def last_step(self, rank):
        steps = [s for r, s in self.parts if r == rank]
        return max(steps) if steps else -1

    def status(self, rank):
        """finished, failed, interrupted, killed (ended with no word of its
        own: a signal, or an exit status not 0 with no exception) or
        unknown (a dump written by an older version)."""
        run = self.runs.get(rank)
        status = run.get("status") if run else None
        if status in (None, "finished") and self.returncode not in (None, 0):
            return "killed" if status is None else "failed"
        return status or ("finished" if self.returncode == 0 else "unknown")

    def ended_early(self, rank):
        return self.status(rank) in ENDED_EARLY

    def run_facts(self, name):
        """{rank: run[name]} of the ranks whose run says it."""
        return {rank: run[name] for rank, run in self.runs.items() if run.get(name)}


# A dump holds its names over and over (each step makes the same calls): one
# regex substitution per name, not per occurrence.
@functools.lru_cache(maxsize=None)
def key(name):
    """A call's name without its counter: what matches across runs."""
    return _COUNTER.sub("", name)


def backward(name):
    return key(name).endswith(".backward")
