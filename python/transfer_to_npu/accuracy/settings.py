"""The dump's settings: its environment variables (the options of
``--dump`` set them, so that every process a launcher starts dumps alike)."""

import fnmatch
import os

ENV = "TRANSFER_TO_NPU_DUMP"
ENV_STEPS = "TRANSFER_TO_NPU_DUMP_STEPS"
ENV_LIST = "TRANSFER_TO_NPU_DUMP_LIST"
ENV_TENSORS = "TRANSFER_TO_NPU_DUMP_TENSORS"
ENV_SEED = "TRANSFER_TO_NPU_DUMP_SEED"
ENV_CHECK = "TRANSFER_TO_NPU_DUMP_CHECK"


class DumpError(ValueError):
    """A dump setting that cannot be used: names the variable and value."""


def parse_steps(text, where=ENV_STEPS):
    """'0-2,5' -> frozenset({0, 1, 2, 5}); '' or None -> None (every step)."""
    if text is None or not text.strip():
        return None
    steps = set()
    for part in text.split(","):
        part = part.strip()
        first, dash, last = part.partition("-")
        try:
            lo = int(first)
            hi = int(last) if dash else lo
        except ValueError:
            raise DumpError(f"{where}={text!r}: {part!r} is not a step or a range of steps "
                            f"(such as 0-2,5)") from None
        if lo < 0 or hi < lo:
            raise DumpError(f"{where}={text!r}: {part!r} is not a range of steps from 0")
        steps.update(range(lo, hi + 1))
    return frozenset(steps)


def parse_patterns(text):
    """'Module.*,Functional.*' -> ('Module.*', 'Functional.*'); '' -> None."""
    if text is None or not text.strip():
        return None
    return tuple(p.strip() for p in text.split(",") if p.strip())


def parse_switch(text, where):
    """'1'/'true'/'yes'/'on' -> True, ''/'0'/'false'/'no'/'off'/None -> False."""
    value = (text or "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise DumpError(f"{where}={text!r} must be 1 or 0")


class Settings:
    """check: each recorded call run again on the host and judged alone
    (percall.py)."""

    def __init__(self, directory, steps=None, patterns=None, tensors=None, check=False):
        if not directory:
            raise DumpError(f"{ENV}: a directory is needed, got {directory!r}")
        self.directory = os.path.abspath(directory)
        self.steps = steps
        self.patterns = patterns
        self.tensors = tensors
        self.check = check

    @classmethod
    def from_environment(cls):
        env = os.environ
        return cls(env.get(ENV, ""), parse_steps(env.get(ENV_STEPS)),
                   parse_patterns(env.get(ENV_LIST)), parse_patterns(env.get(ENV_TENSORS)),
                   parse_switch(env.get(ENV_CHECK), ENV_CHECK))

    def wanted(self, name):
        return self.patterns is None or _matches(name, self.patterns)

    def keeps_tensors(self, name):
        return self.tensors is not None and _matches(name, self.tensors)


def _matches(name, patterns):
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)
