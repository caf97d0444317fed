"""Ascend's one-liner ``from torch_npu.contrib import transfer_to_npu``:
the migration of CUDA's spellings to the npu, as Ascend's turns its own on.
While migrating it is on already; in a converted copy rehearsed as on
torch_npu (``--rehearse``), the line turns it on, as on Ascend."""

from .. import enable

enable()
