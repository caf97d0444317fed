"""Migrating before running: ``python -m transfer_to_npu analyze`` and
``convert`` read source code (never importing or running it) and find, or
rewrite, its CUDA spellings from the same mapping table as the runtime
(``spellings.table_rows``)."""
