"""CUDA- and NCCL-side environment variables: carried over to their NPU
counterparts when those are not set, their values translated where the two
differ in form, and in the mapping table with the API mappings (the log,
the report, --list); those with no counterpart are reported as unsupported
and warned about once."""
import json
import textwrap
from pathlib import Path

import pytest

from conftest import run_python, run_torchrun
from transfer_to_npu import _environment

STAND_INS = Path(__file__).resolve().parent / "stand_ins"

SHOW = textwrap.dedent("""
    import os, sys
    import transfer_to_npu
    names = sys.argv[1].split(",")
    print(*(f"{n}={os.environ.get(n)}" for n in names))
""")

CARRIED = {"NCCL_SOCKET_IFNAME": "lo", "CUDA_LAUNCH_BLOCKING": "1",
           "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,roundup_power2_divisions:4",
           "NCCL_BUFFSIZE": "4194304", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
           "NCCL_SOCKET_FAMILY": "AF_INET"}
NPU = ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "ASCEND_LAUNCH_BLOCKING",
       "PYTORCH_NPU_ALLOC_CONF", "HCCL_BUFFSIZE", "HCCL_ASYNC_ERROR_HANDLING",
       "HCCL_SOCKET_FAMILY")
UNSET = {name: None for name in NPU}


def _show(env, names=NPU, **kwargs):
    proc = run_python(["-c", SHOW, ",".join(names)],
                      env={"TRANSFER_TO_NPU_BACKEND": "virtual", **UNSET, **env}, **kwargs)
    assert proc.returncode == 0, proc.stderr
    return dict(item.split("=", 1) for item in proc.stdout.split()), proc.stderr


def test_variables_are_carried_in_the_npus_form(tmp_path):
    report = tmp_path / "report.json"
    shown, stderr = _show({**CARRIED, "NCCL_DEBUG": "INFO", "TRANSFER_TO_NPU_LOG": "1",
                           "TRANSFER_TO_NPU_REPORT": str(report)})
    assert shown == {"HCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo",
                     "ASCEND_LAUNCH_BLOCKING": "1",
                     "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",  # the NPU's options
                     "HCCL_BUFFSIZE": "4",  # bytes -> MB
                     "HCCL_ASYNC_ERROR_HANDLING": "1",  # NCCL's modes 1-3 -> on
                     "HCCL_SOCKET_FAMILY": "AF_INET"}
    assert ("<environment>: NCCL_BUFFSIZE='4194304' -> HCCL_BUFFSIZE='4'" in stderr)
    assert "roundup_power2_divisions:4 has no counterpart in PYTORCH_NPU_ALLOC_CONF" in stderr
    assert stderr.count("NCCL_DEBUG has no NPU counterpart") == 1
    data = json.loads(report.read_text())
    carried = {m["source"]: m for m in data["mappings"]}
    assert carried["NCCL_SOCKET_IFNAME"] == {"source": "NCCL_SOCKET_IFNAME",
                                             "target": "HCCL_SOCKET_IFNAME", "count": 1,
                                             "sites": ["<environment>"]}
    assert "GLOO_SOCKET_IFNAME" in carried["HCCL_SOCKET_IFNAME"]["target"]
    assert data["unsupported"] == [{"api": "NCCL_DEBUG", "count": 1, "sites": ["<environment>"]}]


def test_the_npus_own_setting_wins():
    shown, _ = _show({"NCCL_SOCKET_IFNAME": "lo", "HCCL_SOCKET_IFNAME": "eth0",
                      "CUDA_LAUNCH_BLOCKING": "1", "ASCEND_LAUNCH_BLOCKING": "0",
                      "GLOO_SOCKET_IFNAME": "lo"})
    assert (shown["HCCL_SOCKET_IFNAME"], shown["ASCEND_LAUNCH_BLOCKING"],
            shown["GLOO_SOCKET_IFNAME"]) == ("eth0", "0", "lo")


def test_an_allocator_setting_the_npu_cannot_take_is_unsupported():
    shown, stderr = _show({"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    assert shown["PYTORCH_NPU_ALLOC_CONF"] == "None"
    assert "PYTORCH_CUDA_ALLOC_CONF has no NPU counterpart" in stderr


def test_disable_unsets_what_was_carried():
    code = textwrap.dedent("""
        import os
        import transfer_to_npu
        print(os.environ.get("HCCL_SOCKET_IFNAME"), os.environ.get("ASCEND_LAUNCH_BLOCKING"))
        transfer_to_npu.disable()
        print(os.environ.get("HCCL_SOCKET_IFNAME"), os.environ.get("ASCEND_LAUNCH_BLOCKING"),
              os.environ["NCCL_SOCKET_IFNAME"])
        transfer_to_npu.enable()
        print(os.environ.get("HCCL_SOCKET_IFNAME"), os.environ.get("ASCEND_LAUNCH_BLOCKING"))
    """)
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_BACKEND": "virtual", **UNSET,
                                         "NCCL_SOCKET_IFNAME": "lo", "CUDA_LAUNCH_BLOCKING": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["lo 1", "None None lo", "lo 1"]


@pytest.mark.parametrize("value", ["4" * 400, "-1", "0", "4M", "", "0x" + "f" * 16])
def test_a_buffer_size_nccl_could_not_use_is_not_carried(value):
    """NCCL_BUFFSIZE is bytes: a value that is not a positive number of
    them NCCL can read (a typo, 0, -1, beyond 64 bits) never stops the
    import; it is warned about once, and HCCL keeps its default."""
    shown, stderr = _show({"NCCL_BUFFSIZE": value})
    assert shown["HCCL_BUFFSIZE"] == "None"
    assert stderr.count(f"NCCL_BUFFSIZE has no NPU counterpart: HCCL_BUFFSIZE ({value!r}") == 1


def test_disable_puts_back_what_it_changed_and_nothing_the_script_changed_since(tmp_path):
    """disable() unsets what enable() carried, and its claims on the log's
    and the report's paths; a variable the script set since (its own
    HCCL_BUFFSIZE) stays, one it unset stays unset, and migration is off."""
    code = textwrap.dedent("""
        import os, torch
        import transfer_to_npu
        owners = ("TRANSFER_TO_NPU_LOG_OWNER", "TRANSFER_TO_NPU_REPORT_OWNER")
        print(os.environ["HCCL_BUFFSIZE"], *(os.environ.get(o) == str(os.getpid())
                                              for o in owners))
        os.environ["HCCL_BUFFSIZE"] = "64"
        del os.environ["HCCL_SOCKET_IFNAME"]
        transfer_to_npu.disable()
        print(os.environ.get("HCCL_BUFFSIZE"), os.environ.get("HCCL_SOCKET_IFNAME"),
              os.environ.get("ASCEND_LAUNCH_BLOCKING"), *(os.environ.get(o) for o in owners),
              transfer_to_npu.is_enabled(), torch.zeros(1, device="cpu").device)
        transfer_to_npu.enable()
        print(os.environ.get("HCCL_BUFFSIZE"), os.environ.get("HCCL_SOCKET_IFNAME"),
              torch.zeros(1, device="cuda").device)
    """)
    proc = run_python(["-c", code], env={
        "TRANSFER_TO_NPU_BACKEND": "virtual", **UNSET, "NCCL_SOCKET_IFNAME": "lo",
        "CUDA_LAUNCH_BLOCKING": "1", "NCCL_BUFFSIZE": "4194304",
        "TRANSFER_TO_NPU_LOG_FILE": str(tmp_path / "log"),
        "TRANSFER_TO_NPU_REPORT": str(tmp_path / "report.json"),
        "TRANSFER_TO_NPU_LOG_OWNER": None, "TRANSFER_TO_NPU_REPORT_OWNER": None})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["4 True True",
                                        "64 None None None None False cpu",
                                        "64 lo npu:0"]


def test_the_virtual_npu_gives_a_cann_home_without_cann():
    """Libraries on their Ascend path (taken as torch_npu imports) read
    ASCEND_HOME_PATH: the virtual NPU gives one with no CANN in it, keeps
    one that is set, and disable() unsets its own."""
    code = textwrap.dedent("""
        import os, re
        import transfer_to_npu
        home = os.environ.get("ASCEND_HOME_PATH")
        # As DeepSpeed looks for CANN's version there.
        print(home is not None and os.path.isdir(home),
              any(re.match(r"ascend_.*_install\\.info", f) for _, _, fs in os.walk(home) for f in fs))
        transfer_to_npu.disable()
        print(os.environ.get("ASCEND_HOME_PATH"))
    """)
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_BACKEND": "virtual",
                                         "ASCEND_HOME_PATH": None})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["True False", "None"]
    shown, _ = _show({"ASCEND_HOME_PATH": "/usr/local/Ascend"}, names=("ASCEND_HOME_PATH",))
    assert shown == {"ASCEND_HOME_PATH": "/usr/local/Ascend"}


def test_the_environment_is_in_the_table():
    proc = run_python(["-m", "transfer_to_npu", "--list"],
                      env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()[1:]}
    assert rows["NCCL_SOCKET_IFNAME"] == ["environment", "HCCL_SOCKET_IFNAME"]
    assert rows["CUDA_VISIBLE_DEVICES"] == ["environment", "ASCEND_RT_VISIBLE_DEVICES"]
    assert rows["NCCL_DEBUG"][0] == "unsupported"


def test_gloo_is_given_no_interface_on_torch_npu():
    """HCCL reads HCCL_SOCKET_IFNAME itself: only the virtual NPU's
    collectives, gloo's, need it translated."""
    shown, _ = _show({"NCCL_SOCKET_IFNAME": "lo", "TRANSFER_TO_NPU_BACKEND": "torch_npu",
                      "PYTHONPATH": str(STAND_INS)}, names=("HCCL_SOCKET_IFNAME",
                                                              "GLOO_SOCKET_IFNAME"))
    assert shown == {"HCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "None"}


NAMES = ["docker0", "eth0", "eth1", "ib0", "lo"]


@pytest.mark.parametrize("spec, chosen", [
    ("eth", "eth0"), ("ib,eth", "ib0"), ("=eth1", "eth1"), ("=eth", None),
    ("^eth", "ib0"), ("^=eth0,ib0", "eth1"), ("^eth,ib", "docker0"), ("wlan", None)])
def test_gloo_gets_the_interface_hccl_would_choose(spec, chosen):
    if chosen is None:
        with pytest.warns(RuntimeWarning, match="names no network interface"):
            assert _environment.gloo_interface(spec, NAMES) is None
    else:
        assert _environment.gloo_interface(spec, NAMES) == chosen


JOB = textwrap.dedent("""
    import os, sys
    import transfer_to_npu
    import torch, torch.distributed as dist
    dist.init_process_group("nccl")
    t = torch.ones(2, device="cuda")
    dist.all_reduce(t)
    sys.stdout.write(f"{dist.get_rank()} {os.environ['GLOO_SOCKET_IFNAME']} {t.tolist()}\\n")
    dist.destroy_process_group()
""")


def test_a_two_rank_job_on_the_interface_nccl_was_given(tmp_path):
    proc = run_torchrun(tmp_path, JOB, env={"TRANSFER_TO_NPU": "1", "NCCL_SOCKET_IFNAME": "lo",
                                            **UNSET})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(proc.stdout.splitlines()) == ["0 lo [2.0, 2.0]", "1 lo [2.0, 2.0]"]
