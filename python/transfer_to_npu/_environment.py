"""The environment variables of the mapping table.

A CUDA- or NCCL-side variable with an NPU counterpart is carried over when
the NPU's is not set (``NCCL_SOCKET_IFNAME`` -> ``HCCL_SOCKET_IFNAME``), its
value translated where the two differ in form; one without a counterpart
is listed in the report's ``unsupported`` and warned about once.  The rows
are installed by the C core as the table's others are (mode
``MODE_ENVIRON``, ``src/environ.c``): counted, logged, reported and listed
with them, and undone by ``disable()``.  Their values come from the
environment of the process, so they are made at each ``enable()``, never
kept.  The variables the NPU's runtime reads when it starts are carried
before the backend is installed (``rows``); the virtual NPU's collectives,
which are gloo's, read theirs when a group is made (``backend_rows``).
"""

import os
import warnings

from . import _C


def _as_is(value):
    return value


def _alloc_conf(value):
    """PYTORCH_CUDA_ALLOC_CONF's options that torch_npu's caching allocator
    has (it refuses any other: "Unrecognized CachingAllocator option")."""
    kept, dropped = [], []
    for option in value.split(","):
        key = option.split(":", 1)[0].strip()
        if key:
            (kept if key in _NPU_ALLOCATOR_OPTIONS else dropped).append(option.strip())
    if dropped:
        warnings.warn(f"transfer_to_npu: PYTORCH_CUDA_ALLOC_CONF: {', '.join(dropped)} has no "
                      f"counterpart in PYTORCH_NPU_ALLOC_CONF and is left out", RuntimeWarning,
                      stacklevel=4)
    if not kept:
        raise ValueError("none of its options is the NPU allocator's")
    return ",".join(kept)


_NPU_ALLOCATOR_OPTIONS = ("max_split_size_mb", "garbage_collection_threshold",
                          "expandable_segments")


def _buffer_mb(value):
    """NCCL_BUFFSIZE is in bytes, HCCL_BUFFSIZE in MB (at least 1).  A value
    that is not a positive number of bytes NCCL could read (a typo, 0, -1,
    more digits than a 64-bit integer holds, which NCCL ignores with a
    warning) is not carried: HCCL keeps its default."""
    try:
        size = int(value.strip(), 0)
    except ValueError:
        raise ValueError(f"{value!r} is not a number of bytes") from None
    if not 0 < size < 1 << 63:
        raise ValueError(f"{value!r} is not a positive number of bytes NCCL can read")
    return str(-(-size // (1 << 20)))


def _on_or_off(value):
    """NCCL's error handling modes (0 to 3): HCCL's is on (1) or off (0)."""
    return "0" if value.strip() in ("", "0") else "1"


# (CUDA-side variable, the NPU's, how a value is carried: a ValueError says
# why the NPU's variable cannot take it), in the order they are carried: of
# two names for one setting, the first set wins.
CARRIED = (
    ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", _as_is),
    ("CUDA_LAUNCH_BLOCKING", "ASCEND_LAUNCH_BLOCKING", _as_is),
    ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NPU_ALLOC_CONF", _alloc_conf),
    # HCCL takes NCCL's forms: prefixes, "^" to exclude, "=" for exact names.
    ("NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", _as_is),
    ("NCCL_SOCKET_FAMILY", "HCCL_SOCKET_FAMILY", _as_is),  # AF_INET, AF_INET6
    ("NCCL_BUFFSIZE", "HCCL_BUFFSIZE", _buffer_mb),
    # torch's own switches of its NCCL process group, and torch_npu's.
    ("TORCH_NCCL_BLOCKING_WAIT", "HCCL_BLOCKING_WAIT", _as_is),
    ("NCCL_BLOCKING_WAIT", "HCCL_BLOCKING_WAIT", _as_is),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "HCCL_ASYNC_ERROR_HANDLING", _on_or_off),
    ("NCCL_ASYNC_ERROR_HANDLING", "HCCL_ASYNC_ERROR_HANDLING", _on_or_off),
    ("TORCH_NCCL_DESYNC_DEBUG", "HCCL_DESYNC_DEBUG", _as_is),
    ("NCCL_DESYNC_DEBUG", "HCCL_DESYNC_DEBUG", _as_is),
)

_TUNING = "a tuning knob of NCCL's transports, which HCCL's do not share"

# Variables with no counterpart, and why.
UNSUPPORTED = {
    "NCCL_DEBUG": "NCCL's log; HCCL logs through ASCEND_GLOBAL_LOG_LEVEL",
    "NCCL_DEBUG_SUBSYS": "NCCL's log; HCCL logs through ASCEND_GLOBAL_LOG_LEVEL",
    "NCCL_DEBUG_FILE": "NCCL's log; HCCL logs through ASCEND_GLOBAL_LOG_LEVEL",
    "NCCL_P2P_DISABLE": "NVLink and PCIe peer-to-peer; HCCL chooses its intra-node links itself",
    "NCCL_P2P_LEVEL": "NVLink and PCIe peer-to-peer; HCCL chooses its intra-node links itself",
    "NCCL_SHM_DISABLE": "NCCL's shared-memory transport",
    "NCCL_IB_DISABLE": "InfiniBand; HCCL's RoCE links are configured with hccn_tool",
    "NCCL_IB_HCA": "InfiniBand; HCCL's RoCE links are configured with hccn_tool",
    "NCCL_IB_GID_INDEX": "InfiniBand; HCCL's RoCE links are configured with hccn_tool",
    "NCCL_NET_GDR_LEVEL": "GPUDirect RDMA",
    "NCCL_ALGO": "NCCL's algorithm names (HCCL_ALGO takes its own, per level)",
    "NCCL_PROTO": _TUNING,
    "NCCL_NTHREADS": _TUNING,
    "NCCL_NSOCKS_PERTHREAD": _TUNING,
    "NCCL_SOCKET_NTHREADS": _TUNING,
    "NCCL_MIN_NCHANNELS": _TUNING,
    "NCCL_MAX_NCHANNELS": _TUNING,
    "NCCL_CROSS_NIC": _TUNING,
    "NCCL_NVLS_ENABLE": "NVLink SHARP",
    "NCCL_COLLNET_ENABLE": "NCCL's in-network reductions",
    "TORCH_NCCL_ENABLE_MONITORING": "torch's watchdog of NCCL groups",
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "torch's watchdog of NCCL groups",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "torch's flight recorder of NCCL groups",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "torch's flight recorder of NCCL groups",
    "TORCH_NCCL_AVOID_RECORD_STREAMS": "CUDA caching-allocator streams of NCCL groups",
    "CUDA_DEVICE_MAX_CONNECTIONS": "CUDA's hardware work queues",
    "CUDA_DEVICE_ORDER": "CUDA's device numbering; NPUs are numbered by their id",
    "CUDA_MODULE_LOADING": "loading of CUDA kernels",
    "CUBLAS_WORKSPACE_CONFIG": "cuBLAS workspaces (deterministic matmuls on the NPU: "
                               "torch.use_deterministic_algorithms)",
}

def _row(source, target, kind, npu_name, value, npu_value=None):
    """A row of the table for variable ``source`` (see src/environ.c): its
    value and what the NPU's variable ``npu_name`` is given, or None when
    it is not set."""
    values = None if value is None else (value, npu_value)
    return (source, target, kind, _C.MODE_ENVIRON, os.environ, npu_name, values, -1, False, ())


# Every name the rows read: os.environ is walked once for those set (a
# look-up of a name that is not set raises and catches two KeyErrors).
_NAMES = frozenset(name for cuda, npu, _ in CARRIED for name in (cuda, npu)) | frozenset(
    UNSUPPORTED) | {"HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "ASCEND_HOME_PATH"}


def _set():
    """The variables of the table that are set: name -> value."""
    return {name: os.environ[name] for name in _NAMES.intersection(os.environ)}


def rows():
    """The table's environment rows, from this process's environment."""
    environ = _set()
    out = []
    for cuda, npu, carry in CARRIED:
        value, carried = environ.get(cuda), None
        if value is not None and npu not in environ:
            try:
                carried = carry(value)
            except ValueError as reason:
                out.append(_row(cuda, f"{npu} ({reason})", "unsupported", "", value))
                continue
        out.append(_row(cuda, npu, "environment", npu, value, carried))
    for cuda, why in UNSUPPORTED.items():
        out.append(_row(cuda, why, "unsupported", "", environ.get(cuda)))
    return out


#: The CANN home the virtual NPU gives (with no CANN in it).
VIRTUAL_HOME = os.path.join(os.path.dirname(__file__), "backends", "virtual")


def backend_rows(backend):
    """On the virtual NPU, whose collectives are gloo's: the network
    interface HCCL is given (or NCCL was, carried above), for gloo; and a
    CANN home, with no CANN in it: libraries that take their Ascend path
    when torch_npu imports (the virtual NPU's does) read CANN's, and
    DeepSpeed's fails without one (it then builds none of its Ascend
    kernels, finding no CANN)."""
    if backend != "virtual":
        return []
    environ = _set()
    value, carried = environ.get("HCCL_SOCKET_IFNAME"), None
    if value is not None and "GLOO_SOCKET_IFNAME" not in environ:
        carried = gloo_interface(value)
        if carried is None:
            value = None
    return [_row("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME (the virtual NPU's collectives)",
                 "environment", "GLOO_SOCKET_IFNAME", value, carried),
            _row("ASCEND_HOME_PATH", "ASCEND_HOME_PATH (the virtual NPU's: no CANN)",
                 "environment", "ASCEND_HOME_PATH",
                 "" if "ASCEND_HOME_PATH" not in environ else None, VIRTUAL_HOME)]


def gloo_interface(spec, names=None):
    """The interface an HCCL_SOCKET_IFNAME (NCCL's form) chooses, as HCCL
    chooses: the first match; among those an exclusion leaves, the first
    that is not docker's or the loopback.  gloo takes exact names only.
    None (and a warning) when no interface matches."""
    if names is None:
        import socket

        names = sorted(name for _, name in socket.if_nameindex())
    exclude = spec.startswith("^")
    body = spec[1:] if exclude else spec
    exact = body.startswith("=")
    patterns = [p.strip() for p in (body[1:] if exact else body).split(",") if p.strip()]

    def matches(name, pattern):
        return name == pattern if exact else name.startswith(pattern)

    if exclude:
        left = [n for n in names if not any(matches(n, p) for p in patterns)]
        ranked = sorted(left, key=lambda n: (n.startswith("docker") or n == "lo", n == "lo"))
        found = ranked[:1]
    else:
        found = [n for p in patterns for n in names if matches(n, p)][:1]
    if not found:
        warnings.warn(f"transfer_to_npu: HCCL_SOCKET_IFNAME={spec!r} names no network interface "
                      f"of this host ({', '.join(names)}); gloo chooses its own", RuntimeWarning,
                      stacklevel=3)
        return None
    return found[0]
