"""A stand-in for Lightning: the part of its CUDA accelerator the migration
changes, as Lightning writes it."""
