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
import torch

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
    interrupted = False
    print("ready", flush=True)
    for _ in range({ROUNDS}):
        try:
            while True:
                out = checkpoint(model, x, use_reentrant=False) if CHECKPOINTED else model(x)
                loss = nn.functional.cross_entropy(out, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if interrupted:
                    # Said once a step has run again, so that the next
                    # Ctrl-C never lands as the script exits on
                    # checkpointing's error.
                    print("interrupted", flush=True)
                    interrupted = False
        except KeyboardInterrupt:
            # An interrupt can land anywhere, as on the CPU: also between
            # torch's switching grad mode off and back on.
            torch.set_grad_enabled(True)
            interrupted = True
        except torch.utils.checkpoint.CheckpointError:
            # Or inside checkpointing's own bookkeeping, whose state it
            # leaves half made, as on the CPU: the next step's recomputation
            # fails.
            print("checkpointing's state left by an interrupt", flush=True)
            sys.exit(4)
    print("interrupted", flush=True)
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


# A script that waits (WAIT: a statement that blocks for a minute), with
# or without migration, and prints how long the wait lasted once Ctrl-C
# ended it.
WAIT = textwrap.dedent("""
    import select, sys, threading, time, torch
    if sys.argv[1] == "migrated":
        import transfer_to_npu
        torch.ones(1, device="cuda")  # the npu in use: its callbacks answered
    print("ready", flush=True)
    start = time.monotonic()
    try:
        {wait}
    except KeyboardInterrupt:
        print(f"{{time.monotonic() - start:.2f}}", flush=True)
""")


@pytest.mark.parametrize("wait", ["time.sleep(60)", "threading.Event().wait(60)",
                                  "select.select([], [], [], 60)"])
def test_ctrl_c_ends_a_wait_at_once_as_in_plain_torch(tmp_path, wait):
    """One Ctrl-C ends a wait in C where it is, as without migration:
    holding it back for torch's callbacks never holds it back where none
    is being answered."""
    answered = {}
    for mode in ("plain", "migrated"):
        proc = _start(tmp_path, WAIT.format(wait=wait), args=(mode,))
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        answered[mode] = float(out.strip())
    assert answered["plain"] < 10
    assert answered["migrated"] < answered["plain"] + 5, answered


# A training loop fed by a DataLoader with worker processes, saving a
# checkpoint every other step and, in its handler, when interrupted; it
# says "training" once its workers have delivered (so that Ctrl-C lands in
# training rather than in starting them, where the interpreter drops it in
# its fork handlers, with or without migration).
FED = textwrap.dedent("""
    import itertools, sys, torch, transfer_to_npu
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset
    ROUNDS, path = int(sys.argv[1]), sys.argv[2]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(2048, 64), torch.randint(0, 10, (2048,)))
    loader = DataLoader(data, batch_size=32, shuffle=True, num_workers=2, pin_memory=True)
    step = 0

    def save():
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                    "step": step}, path)

    print("ready", flush=True)
    for _ in range(ROUNDS):
        try:
            for epoch in itertools.count():
                for i, (x, y) in enumerate(loader):
                    if epoch == 0 and i == 1:
                        print("training", flush=True)
                    x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
                    loss = nn.functional.cross_entropy(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    step += 1
                    if step % 2 == 0:
                        save()
        except KeyboardInterrupt:
            torch.set_grad_enabled(True)
            save()
            print("interrupted", step, flush=True)
    sys.exit(3)
""")

# Interrupts of the fed loop (TTN_INTERRUPTS sets another number, for a
# longer run by hand).
FED_ROUNDS = int(os.environ.get("TTN_INTERRUPTS", "200"))


def test_ctrl_c_in_a_dataloader_fed_checkpointed_loop_always_reaches_the_handler(tmp_path):
    """Ctrl-C as a terminal sends it (to the process group: the DataLoader's
    workers get it too), FED_ROUNDS times at random moments of loading,
    training and saving: each time the script's own handler runs and saves
    its checkpoint, which loads."""
    rng = random.Random(0)
    script = tmp_path / "fed.py"
    script.write_text(FED)
    checkpoint = tmp_path / "checkpoint.pt"
    env = dict(os.environ, TRANSFER_TO_NPU_BACKEND="virtual", OMP_NUM_THREADS="1")
    env.pop("TRANSFER_TO_NPU", None)
    with open(tmp_path / "stderr", "w+") as err:
        proc = subprocess.Popen([sys.executable, str(script), str(FED_ROUNDS), str(checkpoint)],
                                env=env, stdout=subprocess.PIPE, stderr=err, bufsize=0,
                                start_new_session=True)

        # Unbuffered: a line read leaves the next in the pipe, for select.
        def answer(timeout):
            if not select.select([proc.stdout], [], [], timeout)[0]:
                return None
            return proc.stdout.readline().decode().strip()

        try:
            assert answer(120) == "ready"
            again, last = 0, None
            for done in range(FED_ROUNDS):
                assert answer(120) == "training", f"after {done} interrupts"
                time.sleep(rng.uniform(0, 0.05))
                os.killpg(proc.pid, signal.SIGINT)
                line = answer(ANSWER)
                while line is None and again < AGAIN:
                    again += 1
                    os.killpg(proc.pid, signal.SIGINT)
                    line = answer(ANSWER)
                assert line is not None and line.startswith("interrupted"), \
                    f"after {done} interrupts: {line!r}"
                last = int(line.split()[1])
            assert proc.wait(120) == 3
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            proc.stdout.close()
            err.seek(0)
            stderr = err.read()
    for sign in ("SystemError", "Fatal Python error", "terminate called"):
        assert sign not in stderr, stderr[-3000:]
    assert torch.load(checkpoint)["step"] == last
