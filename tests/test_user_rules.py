"""TRANSFER_TO_NPU_RULES: the user's own mappings, in the offline tool's -r
format, and errors that name the file, the rule and the field."""
import json
import textwrap

import pytest

from conftest import run_python


def _project(tmp_path, rules, script):
    (tmp_path / "rules.json").write_text(rules if isinstance(rules, str) else json.dumps(rules))
    (tmp_path / "mylib.py").write_text(textwrap.dedent("""
        def legacy_init(model):
            return "legacy:" + model
        def npu_init(model):
            return "npu:" + model
        def launch(backend, world):
            return backend, world
        class Trainer:
            def setup(self, backend):
                return backend
    """))
    (tmp_path / "mylib_npu.py").write_text("FLAVOUR = 'npu build'\n")
    (tmp_path / "train.py").write_text(textwrap.dedent(script))
    return run_python([str(tmp_path / "train.py")], cwd=tmp_path,
                      env={"TRANSFER_TO_NPU_RULES": str(tmp_path / "rules.json")})


def test_all_three_kinds(tmp_path):
    rules = {"rules": {
        "FuncNameModifyRule": [{"old_name": "mylib.legacy_init", "new_name": "mylib.npu_init"}],
        "ArgsModifyRule": [{"func_name": "mylib.launch", "arg_idx": 0, "arg_new": "hccl"},
                           {"func_name": "mylib.Trainer.setup", "arg_idx": 0, "arg_new": "hccl"}],
        "ModuleNameModifyRule": [{"old_name": "mylib_gpu", "new_name": "mylib_npu",
                                  "parent_module": ""}],
    }}
    proc = _project(tmp_path, rules, """
        import transfer_to_npu
        import mylib
        print(mylib.legacy_init("m"))
        print(mylib.launch("nccl", 2))
        print(mylib.Trainer().setup("nccl"))
        import mylib_gpu
        print(mylib_gpu.FLAVOUR)
        calls = {m["source"]: m["calls"] for m in transfer_to_npu.mappings()}
        print(calls["mylib.legacy_init"], calls["mylib.launch"], calls["mylib.Trainer.setup"])
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["npu:m", "('hccl', 2)", "hccl", "npu build", "1 1 1"]


@pytest.mark.parametrize("rules, message", [
    ("{\"rules\": {\"FuncNameModifyRule\": [{\"old_name\": \"mylib.f\"}]}}",
     "rules.json: FuncNameModifyRule[0]: missing field 'new_name'"),
    ({"rules": {"ArgsModifyRule": [{"func_name": "mylib.launch", "arg_idx": "0",
                                    "arg_new": 1}]}},
     "rules.json: ArgsModifyRule[0]: field 'arg_idx' must be an integer"),
    ({"rules": {"FuncNameModifyRule": [{"old_name": "a.b", "new_name": "c.d"},
                                       {"old_name": "legacy_init", "new_name": "c.d"}]}},
     "rules.json: FuncNameModifyRule[1]: field 'old_name' must be a dotted name"),
    ({"rules": {"Renames": []}}, "rules.json: unknown rule type 'Renames'"),
    ("{\"rules\": {\"FuncNameModifyRule\": [,]}}",
     "rules.json: line 1, column 35: expected a value, found ','"),
    ({"rules": {"ModuleNameModifyRule": [{"old_name": "x", "new_name": "no_such_module_here"}]}},
     "rules.json: ModuleNameModifyRule[0]: module 'no_such_module_here' cannot be imported"),
])
def test_malformed_rules_name_file_rule_and_field(tmp_path, rules, message):
    proc = _project(tmp_path, rules, "import transfer_to_npu\n")
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
    assert "RulesError" in proc.stderr


@pytest.mark.parametrize("rules, message", [
    ({"FuncNameModifyRule": [{"old_name": "os.system", "new_name": "mylib.npu_init"}]},
     "FuncNameModifyRule[0]: old_name 'os.system' is the standard library's"),
    ({"FuncNameModifyRule": [{"old_name": "builtins.open", "new_name": "mylib.npu_init"}]},
     "FuncNameModifyRule[0]: old_name 'builtins.open' is the standard library's"),
    ({"ModuleNameModifyRule": [{"old_name": "json", "new_name": "pickle",
                                "parent_module": ""}]},
     "ModuleNameModifyRule[0]: old_name 'json' is the standard library's"),
    ({"ArgsModifyRule": [{"func_name": "numpy.zeros", "arg_idx": 0, "arg_new": 1}]},
     "ArgsModifyRule[0]: func_name 'numpy.zeros' is an installed package's"),
    ({"FuncNameModifyRule": [{"old_name": "transfer_to_npu.enable",
                              "new_name": "mylib.npu_init"}]},
     "FuncNameModifyRule[0]: old_name 'transfer_to_npu.enable' is this package's"),
    ({"FuncNameModifyRule": [{"old_name": "torch.float32", "new_name": "mylib.npu_init"}]},
     "FuncNameModifyRule[0]: old_name 'torch.float32' is not a function (a torch.dtype)"),
    ({"FuncNameModifyRule": [{"old_name": "mylib.legacy_init",
                              "new_name": "mylib.legacy_init"}]},
     "FuncNameModifyRule[0]: mylib.legacy_init -> mylib.legacy_init maps "
     "'mylib.legacy_init' back to itself"),
    ({"FuncNameModifyRule": [{"old_name": "mylib.legacy_init", "new_name": "mylib.npu_init"},
                             {"old_name": "mylib.npu_init", "new_name": "mylib.legacy_init"}]},
     "FuncNameModifyRule[0]: mylib.legacy_init -> mylib.npu_init -> mylib.legacy_init maps"),
    ({"ModuleNameModifyRule": [{"old_name": "mylib_gpu", "new_name": "mylib_npu",
                                "parent_module": ""},
                               {"old_name": "mylib_npu", "new_name": "mylib_gpu",
                                "parent_module": ""}]},
     "ModuleNameModifyRule[0]: mylib_gpu -> mylib_npu -> mylib_gpu maps"),
])
def test_rules_for_what_is_not_the_users_are_refused_when_read(tmp_path, rules, message):
    """Rules map the user's own code and torch's: one that would rebind the
    standard library, an installed package or this package, wrap what is
    not a function, or lead a name back to itself (a call recursing without
    end), is refused as the file is read, naming the rule; nothing of it is
    patched."""
    proc = _project(tmp_path, {"rules": rules}, """
        import sys
        try:
            import transfer_to_npu
        except ValueError as exc:
            print(exc)
        import os, json, torch
        print(os.system.__module__, json.__name__, torch.zeros(1, dtype=torch.float32).dtype)
    """)
    assert proc.returncode == 0, proc.stderr
    refusal, after = proc.stdout.splitlines()
    assert refusal.startswith(f"{tmp_path / 'rules.json'}: ") and message in refusal, refusal
    assert after == "posix json torch.float32"


def test_torch_and_the_users_own_functions_are_mapped(tmp_path):
    rules = {"rules": {"FuncNameModifyRule": [
        {"old_name": "torch.cuda.empty_cache", "new_name": "mylib.npu_init"},
        {"old_name": "mylib.legacy_init", "new_name": "mylib.npu_init"}]}}
    proc = _project(tmp_path, rules, """
        import transfer_to_npu, torch, mylib
        print(torch.cuda.empty_cache("m"), mylib.legacy_init("m"))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["npu:m", "npu:m"]


def test_missing_rules_file(tmp_path):
    proc = run_python(["-c", "import transfer_to_npu"],
                      env={"TRANSFER_TO_NPU_RULES": str(tmp_path / "nope.json")})
    assert proc.returncode != 0
    assert "cannot read it (No such file or directory)" in proc.stderr


def test_missing_target_is_named_at_the_call(tmp_path):
    rules = {"rules": {"FuncNameModifyRule": [{"old_name": "mylib.legacy_init",
                                               "new_name": "mylib.not_there"}]}}
    proc = _project(tmp_path, rules, """
        import transfer_to_npu, mylib
        mylib.legacy_init("m")
    """)
    assert proc.returncode != 0
    assert "FuncNameModifyRule[0]: new_name 'mylib.not_there' cannot be found" in proc.stderr
