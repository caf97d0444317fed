"""Each pattern's result, a line each: the same unedited through the
runtime migration and converted, run as on torch_npu."""
import os
from unittest import mock

import torch
from app import util

torch_device = os.environ.get("TORCH_DEVICE", "cuda")


def report(name, value):
    print(f"{name}: {value}")


report("torch imported", util.HAS_TORCH)
report("accelerator", util.choose_accelerator())
x = util.default_device()
report("default device", (x.device.type, x.sum().item()))
report("guarded api", util.step(x).tolist())
report("capability", torch.cuda.get_device_capability())
report("cuda version", (torch.version.cuda, torch.version.cuda is not None))
report("bf16", torch.cuda.is_bf16_supported(including_emulation=False))
report("memory known", torch.cuda.get_device_properties(0).total_memory > 0)
report("flash config", util.Attention().config)
skip = not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 8
report("ampere test skipped", skip)
with mock.patch("app.util.torch.cuda.device_count", return_value=3):
    report("mocked count", util.parse_devices())
report("vendor", util.gpu_vendor() if not torch.cuda.is_available() else "skipped")
with mock.patch.object(torch.cuda, "is_available", lambda: False):
    report("vendor mocked off", util.gpu_vendor())
properties = mock.MagicMock(spec=["name"])
properties.name = "GARAGE GPU"
with mock.patch.object(torch.cuda, "is_available", lambda: True), \
        mock.patch("torch.cuda.get_device_properties", lambda i: properties):
    report("vendor mocked on", util.gpu_vendor())
loader = util.Loader()
report("loader", ("is_cuda" in vars(loader), loader.first(torch.ones(2)).sum().item()))
os.environ["CUDA_VISIBLE_DEVICES"] = "0"
report("visible", util.visible_devices())
report("extension", util.fused_layer_norm())
if torch_device == "cuda" and not torch.cuda.is_available():
    report("env device", "skipped")
else:
    report("env device", torch.ones(2).to(torch_device).device.type)
