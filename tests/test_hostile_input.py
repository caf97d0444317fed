"""Hostile arguments where a device is expected: containers that hold
themselves or are nested deep, and keys whose hashing or comparison runs
code that changes the container.  The C core must behave as torch does
(an error or no effect), never crash; each case runs in a process of its
own, so that a crash fails the test instead of the suite."""
import textwrap

import pytest

from conftest import run_python

# Every call shape that hands a device argument to the C core, as a
# function of the argument (the file is written by the script first).
CALLS = {
    "Tensor.to(device=)": "torch.ones(2).to(device=d)",
    "Tensor.to(pos)": "torch.ones(2).to(d)",
    "torch.zeros(device=)": "torch.zeros(2, device=d)",
    "torch.tensor(device=)": "torch.tensor([1.0], device=d)",
    "torch.device(d)": "torch.device(d)",
    "torch.Stream(device=)": "torch.Stream(device=d)",
    "torch.Generator(device=)": "torch.Generator(device=d)",
    "Module.to(d)": "torch.nn.Linear(1, 1).to(d)",
    "Tensor.cuda(d)": "torch.ones(2).cuda(d)",
    "Module.cuda(d)": "torch.nn.Linear(1, 1).cuda(d)",
    "torch.load(map_location=d)": "torch.load(PATH, map_location=d)",
    "torch.load(map_location={'cpu': d})": "torch.load(PATH, map_location={'cpu': d})",
    "torch.load(map_location={d_key: 'cpu'})": "torch.load(PATH, map_location={'x': 'cpu', 'y': d})",
}

VALUES = {
    "a dict that holds itself": "d = {}; d['cuda:0'] = d",
    "a list that holds itself": "d = []; d.append(d)",
    "a dict nested 100000 deep": "d = {}\nfor _ in range(100000):\n    d = {'cuda': d}",
    "a list nested 100000 deep": "d = []\nfor _ in range(100000):\n    d = [d]",
}

SETUP = """
import os, sys, tempfile, torch
PATH = os.path.join(tempfile.mkdtemp(), "t.pt")
torch.save(torch.ones(2), PATH)
{value}

def outcome(call):
    try:
        call()
    except Exception as e:
        return type(e).__name__
    return "ok"

calls = {{{calls}}}
plain = {{name: outcome(call) for name, call in calls.items()}}
import transfer_to_npu
for name, call in calls.items():
    print(name, "|", plain[name], "|", outcome(call))
"""


@pytest.mark.parametrize("value", sorted(VALUES))
def test_recursive_and_deep_containers_behave_as_in_torch(value):
    """Every call shape, in one process per kind of value (a crash in any
    fails the test): each outcome is torch's own."""
    calls = ", ".join(f"{name!r}: lambda: {call}" for name, call in sorted(CALLS.items()))
    script = SETUP.format(value=VALUES[value], calls=calls)
    proc = run_python(["-c", script], env={"TRANSFER_TO_NPU_BACKEND": "virtual"}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [line.split(" | ") for line in proc.stdout.splitlines() if " | " in line]
    assert len(results) == len(CALLS), proc.stdout
    for name, plain, migrated in results:
        assert migrated == plain, f"{name}: torch gives {plain}, migrated {migrated}"


def test_map_location_keys_that_change_the_dict_while_it_is_read():
    """A str subclass whose __hash__ and __eq__ clear the dict being read
    (and drop the last references to its keys and values): the call does
    what torch does, no memory is read after it is freed (make sanitize
    runs this under AddressSanitizer)."""
    script = textwrap.dedent("""
        import gc, os, tempfile, torch
        import transfer_to_npu
        path = os.path.join(tempfile.mkdtemp(), "t.pt")
        torch.save(torch.ones(2), path)

        armed = False

        class Evil(str):
            def __hash__(self):
                if armed:
                    victim.clear()
                    gc.collect()
                return str.__hash__(self)
            def __eq__(self, other):
                if armed:
                    victim.clear()
                return str.__eq__(self, other)

        results = []
        for i in range(50):
            armed = False
            victim = {Evil("cuda:0"): Evil("cuda:0"), "cpu": "cuda:0", Evil("x" * i): "cpu"}
            armed = True
            try:
                t = torch.load(path, map_location=victim)
                results.append(str(t.device))
            except Exception as e:
                results.append(type(e).__name__)
        print(sorted(set(results)))
    """)
    proc = run_python(["-c", script], env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() in ("['cpu']", "['npu:0']", "['cpu', 'npu:0']"), proc.stdout


def test_device_keywords_whose_names_change_the_call_while_it_is_read():
    """A str-subclass device string whose __repr__ (shown in the log) runs
    code that drops the call's other arguments: the rewrite holds what it
    reads."""
    script = textwrap.dedent("""
        import gc, torch
        import transfer_to_npu

        class Loud(str):
            def __repr__(self):
                kwargs.clear()
                gc.collect()
                return str.__repr__(self)

        for _ in range(20):
            kwargs = {"type": Loud("cuda"), "index": 0}
            d = torch.device(**kwargs)
            kwargs = {"device": Loud("cuda:0")}
            s = torch.Stream(**kwargs)
        print(d, s.device)
    """)
    proc = run_python(["-c", script], env={"TRANSFER_TO_NPU_BACKEND": "virtual",
                                           "TRANSFER_TO_NPU_LOG": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["npu:0", "npu:0"]
