"""apex.amp on the NPU (``_amp.py``)."""

from ._amp import initialize, load_state_dict, master_params, scale_loss, state_dict  # noqa: F401
from ._amp import __all__  # noqa: F401
