"""accelerate: its state (``PartialState``, which ``Accelerator`` and
transformers' ``TrainingArguments`` make) takes a ``backend``.  Once
``torch_npu`` imports (served on the virtual NPU, Ascend's otherwise),
accelerate chooses the NPU and ``hccl`` itself, and refuses a backend the
script asked for that differs (``ValueError: Your assigned backend nccl is
not available, please use hccl``: ``TrainingArguments(ddp_backend='nccl')``,
``InitProcessGroupKwargs(backend='nccl')``).  The backend argument is
rewritten as ``init_process_group``'s is (``'nccl'`` -> ``'hccl'``), so
that the CUDA spelling and accelerate's Ascend path agree.  The row waits
in the import hook until accelerate is imported.
"""

from .. import _C
from ._row import row


def rows(torch):
    return [row("accelerate.state.PartialState", "accelerate.state.PartialState(backend='hccl')",
                "backend", _C.MODE_BACKEND, "accelerate.state:PartialState", "__init__",
                binds=True, kws=())]
