"""Ctrl-C during a migrated training loop on the virtual NPU: always the
KeyboardInterrupt that the same loop gets on the CPU, so that the user's
handler, the log's summary and the report survive it.  torch calls the
virtual NPU's device guard from destructors and noexcept functions, where
an exception raised by a signal handler would end the process."""
import json
import os
import random
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

# Trains until interrupted, ROUNDS times, then exits through its own
# handler.
ROUNDS = 40
TRAIN = textwrap.dedent(f"""
    import sys, torch, transfer_to_npu
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint
    CHECKPOINTED = len(sys.argv) > 1
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64, device="cuda")
    y = torch.randint(0, 10, (32,), device="cuda")
    print("ready", flush=True)
    for _ in range({ROUNDS}):
        try:
            while True:
                out = checkpoint(model, x, use_reentrant=False) if CHECKPOINTED else model(x)
                loss = nn.functional.cross_entropy(out, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        except KeyboardInterrupt:
            # An interrupt can land anywhere, as on the CPU: also between
            # torch's switching grad mode off and back on.
            torch.set_grad_enabled(True)
            print("interrupted", flush=True)
        except torch.utils.checkpoint.CheckpointError:
            # Or inside checkpointing's own bookkeeping, whose state it
            # leaves half made, as on the CPU: the next step's recomputation
            # fails.
            print("checkpointing's state left by an interrupt", flush=True)
            sys.exit(4)
    sys.exit(3)
""")

# Seconds to wait for the script's "interrupted".  The interpreter raises
# KeyboardInterrupt wherever it is, also in a weakref callback (checkpointing
# frees its saved tensors through those), where it prints it and drops it,
# as on the CPU: the Ctrl-C is then pressed again, a few times at most.
ANSWER = 5
AGAIN = 3


def _start(tmp_path, code, env=None, args=()):
    script = tmp_path / "script.py"
    script.write_text(code)
    full = dict(os.environ, TRANSFER_TO_NPU_BACKEND="virtual", **(env or {}))
    full.pop("TRANSFER_TO_NPU", None)
    proc = subprocess.Popen([sys.executable, str(script), *args], env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc


@pytest.mark.parametrize("checkpointed", [False, True], ids=["plain", "checkpointed"])
def test_ctrl_c_in_a_training_loop_always_raises_keyboard_interrupt(tmp_path, checkpointed):
    """Interrupted at random moments of forward, backward and the optimizer
    step, many times over: each time the script's own handler runs, and at
    the end the summary is logged and the report written.  Checkpointed,
    the forward is run again inside backward, by a hook of torch's engine
    (test_hook_exceptions.py)."""
    rng = random.Random(0)
    report = tmp_path / "report.json"
    proc = _start(tmp_path, TRAIN, {"TRANSFER_TO_NPU_LOG": "1",
                                    "TRANSFER_TO_NPU_REPORT": str(report)},
                  args=("checkpointed",) if checkpointed else ())
    again = 0
    for _ in range(ROUNDS):
        time.sleep(rng.uniform(0.01, 0.1))
        proc.send_signal(signal.SIGINT)
        while not select.select([proc.stdout], [], [], ANSWER)[0] and again < AGAIN:
            again += 1
            proc.send_signal(signal.SIGINT)
        if again == AGAIN and not select.select([proc.stdout], [], [], 0)[0]:
            proc.kill()
            line = f"no answer to {AGAIN} Ctrl-C pressed again"
            break
        line = proc.stdout.readline().strip()
        if line != "interrupted":
            break
    out, err = proc.communicate(timeout=120)
    assert ((proc.returncode, line) == (3, "interrupted")
            or (checkpointed and (proc.returncode, line) == (
                4, "checkpointing's state left by an interrupt"))), err[-2000:]
    assert "summary" in err
    assert json.loads(report.read_text())["mappings"]


def test_the_scripts_own_sigint_handler_is_left_alone(tmp_path):
    code = textwrap.dedent("""
        import signal, sys
        def mine(signum, frame):
            raise SystemExit(7)
        signal.signal(signal.SIGINT, mine)
        import torch, transfer_to_npu
        assert signal.getsignal(signal.SIGINT) is mine
        print("ready", flush=True)
        while True:
            torch.ones(8, device="cuda").sum()
    """)
    proc = _start(tmp_path, code)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 7


def test_a_second_ctrl_c_ends_a_wait_at_once(tmp_path):
    """The first Ctrl-C takes effect at the next Python instruction, which
    a wait in C (time.sleep) holds back; a second one raises there and
    then, as the default handler does."""
    code = textwrap.dedent("""
        import time, torch, transfer_to_npu
        torch.ones(1, device="cuda")
        print("ready", flush=True)
        start = time.monotonic()
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            print(f"{time.monotonic() - start:.1f}")
    """)
    proc = _start(tmp_path, code)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert float(out.strip()) < 30
