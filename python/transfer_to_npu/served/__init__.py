"""The modules served under other packages' names while migrating
(``_served.py`` serves them): ``torch_npu`` on the virtual NPU, and
``flash_attn``, ``xformers`` and ``apex`` on the NPU.

A module named for a package (``flash_attn.py``, ``apex_amp.py``) is what
``import flash_attn`` or ``import apex.amp`` gives: its public names only,
each a row of the mapping table (``_rules/served.py``) whose target is the
implementation in a module of its own (``_flash.py``, ``_amp.py``...), so
that their calls are counted, logged and reported.
"""
