"""torch.compile's default compiler on the virtual NPU.

Inductor generates Triton code for any device but the cpu, which the
virtual NPU cannot run; and in a migrated process it reads torch.cuda's
device properties, which answer for the npu, so its cpu path fails too.
``aot_eager`` stands in for it: dynamo's capture and AOTAutograd's tracing
run as they would on an NPU, and the ops run the eager kernels, so results
equal eager mode.
"""


def aot_eager(gm, example_inputs, **inductor_settings):
    """A torch.compile backend.  ``inductor_settings`` (the mode and options
    of torch.compile) tune inductor's code generation, which is not used."""
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend("aot_eager")(gm, example_inputs)
