"""Hugging Face's libraries see the NPU they would see on an Ascend
machine: their torch_npu probes are true while migrating, a Trainer trains
on npu in fp16 and bf16 (on transformers' Ascend attention path too, and
through apex) and resumes from a checkpoint, and accelerate picks hccl, also when the script
asks for nccl.  Tiny configs built here; nothing is downloaded."""
import socket
import textwrap

import pytest

from conftest import run_python

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

VIRTUAL = {"TRANSFER_TO_NPU_BACKEND": "virtual", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1", "TOKENIZERS_PARALLELISM": "false"}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_npu_detection_only_while_migrating():
    probe = ("from transformers.utils import is_torch_npu_available; "
             "from accelerate.utils import is_npu_available; "
             "print(is_torch_npu_available(), is_npu_available())")
    proc = run_python(["-c", probe], env=VIRTUAL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]
    proc = run_python(["-c", "import transfer_to_npu; " + probe], env=VIRTUAL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True"]


TRAINER = textwrap.dedent("""
    import sys
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    precision, attention, out, resume = sys.argv[1:5]
    if precision.startswith("apex-"):  # fp16 through apex.amp, at that opt level
        precision = {"fp16": True, "half_precision_backend": "apex",
                     "fp16_opt_level": precision[len("apex-"):]}
    else:
        precision = {precision: True}
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=32)
    torch.manual_seed(0)
    model = LlamaForCausalLM._from_config(config, attn_implementation=attention)
    if len(sys.argv) > 5:  # LoRA through peft
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 16
        def __getitem__(self, i):
            ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids}

    args = TrainingArguments(output_dir=out, per_device_train_batch_size=4, max_steps=4,
                             save_steps=2, logging_steps=1, report_to=[], seed=0,
                             learning_rate=1e-2, **precision)
    trainer = Trainer(model=model, args=args, train_dataset=Data())
    result = trainer.train(resume_from_checkpoint=None if resume == "-" else resume)
    params = torch.cat([p.detach().float().flatten().cpu() for p in trainer.model.parameters()])
    print("device", args.device, next(trainer.model.parameters()).device)
    print("dtype", next(trainer.model.parameters()).dtype)
    print("attention", trainer.model.config._attn_implementation)
    print("loss", result.training_loss)
    torch.save(params, out + "/final.pt")
""")


def _train(tmp_path, *args, name="run"):
    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    out = tmp_path / name
    proc = run_python(["-m", "transfer_to_npu", str(script), args[0], args[1], str(out),
                       *args[2:]], env=VIRTUAL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, out


def test_trainer_fp16_trains_on_npu_and_resumes(tmp_path):
    import torch

    stdout, out = _train(tmp_path, "fp16", "sdpa", "-")
    assert "device npu:0 npu:0" in stdout
    # Resumed from step 2 of the same run, it ends where the run ended.
    stdout, resumed = _train(tmp_path, "fp16", "sdpa", str(out / "checkpoint-2"), name="resumed")
    assert "device npu:0 npu:0" in stdout
    torch.testing.assert_close(torch.load(resumed / "final.pt"), torch.load(out / "final.pt"))


def _has_apex_backend():
    import dataclasses

    from transformers import TrainingArguments

    return any(f.name == "half_precision_backend" for f in dataclasses.fields(TrainingArguments))


@pytest.mark.skipif(not _has_apex_backend(), reason="transformers 5 trains through torch.amp "
                                                    "only (no half_precision_backend)")
def test_trainer_fp16_through_apex_o2(tmp_path):
    """half_precision_backend='apex': transformers finds apex by its
    distribution's metadata (served), then trains through amp.initialize
    at O2: a float16 model, float32 master weights."""
    stdout, _ = _train(tmp_path, "apex-O2", "sdpa", "-")
    assert "device npu:0 npu:0" in stdout and "dtype torch.float16" in stdout
    loss = float(next(line.split()[1] for line in stdout.splitlines() if line.startswith("loss")))
    assert 0 < loss < 10


def test_trainer_bf16_on_transformers_ascend_attention_with_lora(tmp_path):
    """attn_implementation='flash_attention_2' trains: through the served
    flash_attn (transformers 4.57) or transformers' Ascend path,
    torch_npu.npu_fusion_attention (5.x); the LoRA adapters come from
    peft."""
    pytest.importorskip("peft")
    stdout, _ = _train(tmp_path, "bf16", "flash_attention_2", "-", "lora")
    assert "device npu:0 npu:0" in stdout
    assert "attention flash_attention_2" in stdout


def test_accelerate_takes_the_script_s_nccl_as_hccl():
    """accelerate, seeing torch_npu, chooses hccl; a script that asks for
    nccl (Trainer's ddp_backend, InitProcessGroupKwargs) used to be refused:
    'Your assigned backend nccl is not available, please use hccl'."""
    code = textwrap.dedent("""
        import transfer_to_npu, torch
        from accelerate import PartialState
        state = PartialState(backend="nccl")
        print(state.distributed_type, state.backend, state.device,
              torch.distributed.get_backend())
    """)
    env = dict(VIRTUAL, LOCAL_RANK="0", RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    proc = run_python(["-c", code], env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["DistributedType.MULTI_NPU", "hccl", "npu:0", "hccl"]


ACCELERATE = textwrap.dedent("""
    import sys
    import torch
    from accelerate import Accelerator

    accelerator = Accelerator()
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    loss = model(torch.randn(8, 4, device=accelerator.device)).pow(2).mean()
    accelerator.backward(loss)
    optimizer.step()
    state = accelerator.state
    with open(f"{sys.argv[1]}/rank{state.process_index}", "w") as f:
        print(state.distributed_type, state.backend, torch.distributed.get_backend(),
              next(model.parameters()).device, file=f)
""")


def test_accelerate_launch_multi_gpu_picks_hccl(tmp_path):
    script = tmp_path / "acc.py"
    script.write_text(ACCELERATE)
    proc = run_python(["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                       "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend",
                       "no", "--main_process_port", str(_free_port()), str(script),
                       str(tmp_path)],
                      env=dict(VIRTUAL, TRANSFER_TO_NPU="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        assert (tmp_path / f"rank{rank}").read_text().split() == [
            "DistributedType.MULTI_NPU", "hccl", "hccl", f"npu:{rank}"]
