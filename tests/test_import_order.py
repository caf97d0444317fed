"""Import order does not matter: names bound before the one-line import are
migrated, and modules imported after it are patched when they load."""
import textwrap

from conftest import run_python


def test_names_bound_before_the_import(tmp_path):
    (tmp_path / "helpers.py").write_text(textwrap.dedent("""
        from torch.cuda import synchronize, is_available
        from torch.distributed import init_process_group
        import torch
        ones = torch.ones
    """))
    # A package's module, found by its top-level name.
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "__init__.py").write_text("")
    (tmp_path / "tools" / "timing.py").write_text("from torch.cuda import synchronize\n")
    # Named like a package the migration never scans (numpy), but not it.
    (tmp_path / "numpy_extras.py").write_text("from torch.cuda import synchronize\n")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        from torch.cuda import synchronize, device_count
        from torch.distributed import init_process_group
        zeros = torch.zeros
        import helpers
        import tools.timing
        import numpy_extras
        import transfer_to_npu

        assert zeros(2, device="cuda").device.type == "npu"
        assert helpers.ones(2, device="cuda:0").device.type == "npu"
        synchronize()
        helpers.synchronize()
        tools.timing.synchronize()
        numpy_extras.synchronize()
        assert helpers.is_available() is True and device_count() >= 1
        assert init_process_group.__npu_source__ == "torch.distributed.init_process_group"
        assert helpers.init_process_group is init_process_group
        calls = {m["source"]: m["calls"] for m in transfer_to_npu.mappings()}
        assert calls["torch.cuda.synchronize"] == 4, calls
        transfer_to_npu.disable()
        assert not hasattr(zeros, "__npu_source__")
        assert not hasattr(helpers.synchronize, "__npu_source__")
        print("ok")
    """))
    proc = run_python([str(script)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_module_imported_later_is_patched(tmp_path):
    # torch.distributed.fsdp is not imported by `import torch`; nor is a
    # user module named by a rule.  Both get their rows when they load.
    (tmp_path / "late.py").write_text(textwrap.dedent("""
        def place(x, device=None):
            return x.to(device)
    """))
    rules = tmp_path / "rules.json"
    rules.write_text('{"rules": {"FuncNameModifyRule": [{"old_name": "late.place", '
                     '"new_name": "late_impl.place_on_npu"}]}}')
    (tmp_path / "late_impl.py").write_text(textwrap.dedent("""
        def place_on_npu(x, device=None):
            return x.to("npu")
    """))
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import sys
        import transfer_to_npu, torch
        assert "late" not in sys.modules
        # Listed before its module is imported, with no calls yet: the
        # table does not change size during a run.
        before = {m["source"]: m["calls"] for m in transfer_to_npu.mappings()}
        assert before["late.place"] == 0
        import late
        assert len(transfer_to_npu.mappings()) == len(before)
        y = late.place(torch.ones(1), "cpu")
        assert y.device.type == "npu", y.device
        print("ok")
    """))
    proc = run_python([str(script)], cwd=tmp_path, env={"TRANSFER_TO_NPU_RULES": str(rules)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
