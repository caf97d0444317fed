"""Library code written for CUDA, in the shapes real code bases have: each
function is one pattern the conversion must keep the meaning of."""
import os
import subprocess

try:
    import torch
    HAS_TORCH = True
except ImportError:  # a library that works without torch
    HAS_TORCH = False


def choose_accelerator():
    """litgpt's LLM.load: Lightning's accelerator chosen by a test of CUDA."""
    if torch.cuda.is_available():
        accelerator = "cuda"
    else:
        accelerator = "cpu"
    return accelerator


def default_device():
    """A device string chosen by a test, flowing into device arguments."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.ones(3, device=device)


def parse_devices():
    """litgpt's parse_devices: what tests mock."""
    return torch.cuda.device_count() or 1


def step(x):
    """A test of the tensor's device guarding an API torch_npu lacks."""
    if x.is_cuda:
        torch.cuda.nvtx.range_push("step")
    return x * 2


def gpu_vendor():
    """litgpt's check_nvlink_connectivity: a vendor's tool run under a test
    of CUDA."""
    if torch.cuda.is_available():
        name = torch.cuda.get_device_properties(0).name
        if "nvidia" in name.lower():
            return _nvidia_links()
        return f"unrecognized {name}"
    return "no gpus"


def _nvidia_links():
    return subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True).stdout


class Attention:
    """vit-pytorch's flash attention config: an early return, then the
    device's properties."""

    def __init__(self):
        self.config = "cpu"
        if not torch.cuda.is_available():
            return
        properties = torch.cuda.get_device_properties(torch.device("cuda"))
        if properties.major == 8 and properties.minor == 0:
            self.config = "a100"
        else:
            self.config = "other"


class Loader:
    """timm's PrefetchLoader: a public flag the class sets itself."""

    def __init__(self, device=torch.device("cuda")):
        self.device = device
        self.is_cuda = device.type == "cuda" and torch.cuda.is_available()

    def first(self, batch):
        if self.is_cuda:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                batch = batch.to(self.device, non_blocking=True)
            torch.cuda.current_stream().wait_stream(stream)
        return batch


def visible_devices():
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def fused_layer_norm():
    """gpt-neox: apex's extension named in a string."""
    import importlib

    try:
        return importlib.import_module("fused_layer_norm_cuda")
    except ImportError:
        return None
