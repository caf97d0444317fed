"""Accuracy tools: the dump of a run and compare (docs/accuracy.md).

Nothing here is imported unless a dump or a compare is asked for
(``TRANSFER_TO_NPU_DUMP``, ``--dump``, ``python -m transfer_to_npu compare``).
"""
