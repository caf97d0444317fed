"""Reading a dump: its steps and ranks, each part's calls, call sites,
modules and scalars."""

import json
import os
import re

_STEP = re.compile(r"^step(\d+)$")
_RANK = re.compile(r"^rank(\d+)$")
_COUNTER = re.compile(r"\.\d+(?=\.(?:forward|backward)$)|(?<=\.forward)\.\d+$|"
                      r"(?<=\.backward)\.\d+$")


class CompareError(Exception):
    """A compare that cannot be made: says why, naming the path."""


# --- reading dumps -------------------------------------------------------------

class Part:
    """One rank's step of a dump."""

    def __init__(self, place):
        self.place = place
        self.calls, self.stack, self.construct, self.scalars = [], {}, {}, []
        self.problem = None
        # The kept tensors beside it (the dump may have been moved).
        self.tensor_dir = os.path.join(place, "dump_tensor_data")
        try:
            with open(os.path.join(place, "dump.json"), encoding="utf-8") as f:
                self.calls = list(json.load(f).get("data", {}).items())
            for name in ("stack", "construct", "scalars"):
                path = os.path.join(place, f"{name}.json")
                if os.path.exists(path):
                    with open(path, encoding="utf-8") as f:
                        setattr(self, name, json.load(f))
        except (OSError, ValueError, AttributeError) as exc:
            self.problem = f"{place}: cannot be read ({exc})"
            self.calls = []


def load(directory):
    """{(rank, step): Part} of a dump directory."""
    if not os.path.isdir(directory):
        raise CompareError(f"{directory}: not a directory")
    parts = {}
    for step_dir in os.listdir(directory):
        s = _STEP.match(step_dir)
        if not s:
            continue
        for rank_dir in os.listdir(os.path.join(directory, step_dir)):
            r = _RANK.match(rank_dir)
            place = os.path.join(directory, step_dir, rank_dir)
            if r and os.path.exists(os.path.join(place, "dump.json")):
                parts[(int(r.group(1)), int(s.group(1)))] = Part(place)
    if not parts:
        raise CompareError(f"{directory}: no dump in it (step*/rank*/dump.json, as "
                           f"`python -m transfer_to_npu --dump {directory} ...` writes)")
    return parts


def key(name):
    """A call's name without its counter: what matches across runs."""
    return _COUNTER.sub("", name)
