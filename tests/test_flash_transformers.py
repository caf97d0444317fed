"""transformers' flash-attention paths on the served flash_attn, whatever
transformers is installed (4.57 and 5.x are tested): every flash_attn name
transformers imports resolves, its modeling modules that import flash_attn
import while migrating (ModernBert's rotary among them), and
``attn_implementation="flash_attention_2"`` gives sdpa's results, padded,
packed, generating, and (5.x) decoding from a paged cache.

Each runs in a fresh interpreter: transformers caches its availability
checks, which must see the migration."""
import textwrap

import pytest

from conftest import run_python

pytest.importorskip("transformers")

ENV = {"TRANSFER_TO_NPU_BACKEND": "virtual", "OMP_NUM_THREADS": "1"}

IMPORTS = textwrap.dedent("""
    import ast, importlib, pathlib
    import transfer_to_npu, transformers

    root = pathlib.Path(transformers.__file__).parent
    names, modules = set(), []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if "from flash_attn" not in source and "import flash_attn" not in source:
            continue
        found = False
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module == "flash_attn" or node.module.startswith("flash_attn.")):
                found = True
                # flash_attn.cute is FlashAttention 4, which transformers takes
                # only from a "flash-attn-4" distribution.
                if not node.module.startswith("flash_attn.cute"):
                    names.update((node.module, a.name) for a in node.names)
        if found and not path.name.startswith("modular_"):
            modules.append(".".join(path.relative_to(root.parent).with_suffix("").parts))
    for module, name in sorted(names):
        getattr(importlib.import_module(module), name)
    for module in modules:  # ModernBert's imports its rotary at import time
        importlib.import_module(module)
    print("names", len(names), "modules", len(modules))
""")


def test_flash_attn_names_and_the_modules_importing_them_resolve_while_migrating():
    proc = run_python(["-c", IMPORTS], env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    names, modules = (int(n) for n in proc.stdout.split()[1::2])
    assert names >= 3 and modules >= 1


MODERNBERT = textwrap.dedent("""
    import copy
    import transfer_to_npu, torch
    from transformers import ModernBertConfig, ModernBertModel
    from transformers.utils import is_flash_attn_2_available

    torch.manual_seed(0)
    config = ModernBertConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                              num_hidden_layers=2, num_attention_heads=4, local_attention=4,
                              global_attn_every_n_layers=2, max_position_embeddings=32,
                              pad_token_id=0)
    flash = ModernBertModel._from_config(copy.deepcopy(config),
                                         attn_implementation="flash_attention_2")
    sdpa = ModernBertModel._from_config(copy.deepcopy(config), attn_implementation="sdpa")
    sdpa.load_state_dict(flash.state_dict())
    ids = torch.randint(1, 64, (2, 9)).cuda()
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    outs = [m.cuda().eval()(input_ids=ids, attention_mask=mask).last_hidden_state
            for m in (flash, sdpa)]
    keep = mask.bool()
    print(is_flash_attn_2_available(), outs[0].device,
          (outs[0][keep].float() - outs[1][keep].float()).abs().max().item())
""")


def test_modernbert_flash_attention_2_equals_sdpa():
    """transformers 4.57's ModernBert takes flash_attn's rotary embedding
    and packed varlen attention when flash_attn is available."""
    proc = run_python(["-c", MODERNBERT], env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    available, device, diff = proc.stdout.split()
    assert available == "True" and device == "npu:0"
    assert float(diff) < 2e-2  # the flash path computes in bfloat16


LLAMA = textwrap.dedent("""
    import copy
    import transfer_to_npu, torch
    import transformers.modeling_flash_attention_utils as utils
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    # flash_attn's own path, as transformers takes it on CUDA (5.x prefers
    # its Ascend integration where torch_npu imports).
    utils.is_torch_npu_available = lambda *args, **kwargs: False

    def calls(source):
        return next(m["calls"] for m in transfer_to_npu.mappings() if m["source"] == source)

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64)
    flash = LlamaForCausalLM._from_config(copy.deepcopy(config),
                                          attn_implementation="flash_attention_2")
    sdpa = LlamaForCausalLM._from_config(copy.deepcopy(config), attn_implementation="sdpa")
    sdpa.load_state_dict(flash.state_dict())
    flash, sdpa = flash.cuda().eval(), sdpa.cuda().eval()
    ids = torch.randint(1, 64, (2, 7)).cuda()
    mask = torch.ones_like(ids)
    mask[0, :2] = 0  # left padding: the varlen path
    diff = lambda a, b: (a - b).abs().max().item()
    with torch.no_grad():
        print("padded", diff(flash(ids, attention_mask=mask).logits[mask.bool()],
                             sdpa(ids, attention_mask=mask).logits[mask.bool()]))
        print("plain", diff(flash(ids).logits, sdpa(ids).logits))
        # Two sequences packed into one row, told apart by their positions.
        packed, positions = ids[1:], torch.tensor([[0, 1, 2, 0, 1, 2, 3]]).cuda()
        apart = torch.cat([sdpa(packed[:, :3]).logits, sdpa(packed[:, 3:]).logits], dim=1)
        print("packed", diff(flash(packed, position_ids=positions).logits, apart))
    print("varlen calls", calls("flash_attn.flash_attn_varlen_func") > 0)
    prompt = ids[1:, :4]
    generated = flash.generate(prompt, max_new_tokens=4, do_sample=False)
    expected = sdpa.generate(prompt, max_new_tokens=4, do_sample=False)
    print("generate", torch.equal(generated, expected))
    if hasattr(flash, "generate_batch") and hasattr(utils, "_flash_with_kvcache_fn"):
        from transformers import ContinuousBatchingConfig

        before = calls("flash_attn.flash_attn_with_kvcache")
        out = flash.generate_batch(
            [prompt[0].tolist()], generation_config=GenerationConfig(
                max_new_tokens=4, do_sample=False, eos_token_id=-1, pad_token_id=0),
            continuous_batching_config=ContinuousBatchingConfig(num_blocks=8,
                                                                max_batch_tokens=32),
            warmup=False)
        tokens = next(iter(out.values())).generated_tokens
        print("paged", tokens == expected[0, 4:].tolist(),
              calls("flash_attn.flash_attn_with_kvcache") > before)
""")


def test_llama_flash_attention_2_equals_sdpa():
    proc = run_python(["-c", LLAMA], env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    for path in ("padded", "plain", "packed"):
        assert float(out[path]) < 1e-5, (path, out[path])
    assert out["varlen"] == "calls True" and out["generate"] == "True"
    if "paged" in out:  # transformers 5: continuous batching's paged cache
        assert out["paged"] == "True True"
