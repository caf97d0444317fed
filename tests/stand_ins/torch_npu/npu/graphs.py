"""torch_npu.npu.graphs of the stand-in: NPUGraph and the graph context
manager, recording what they are asked."""
from . import _recorded

made = []


class NPUGraph:
    def __init__(self, *args, **kwargs):
        made.append("NPUGraph")

    def replay(self):
        made.append("replay")


class graph:
    def __init__(self, npu_graph, pool=None, stream=None, capture_error_mode="global"):
        made.append("graph")
        self.npu_graph = npu_graph

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@_recorded
def graph_pool_handle():
    return (0, 0)


@_recorded
def make_graphed_callables(callables, sample_args, num_warmup_iters=3,
                           allow_unused_input=False, pool=None):
    return callables
