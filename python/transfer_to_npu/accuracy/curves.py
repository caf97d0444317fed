"""The scalars a script reads (its loss), as curves: text and curves.png."""

from .verdicts import _number, _rel

def fmt(v):
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else str(v)


def text(p, curves, most=12):
    for site, series in sorted(curves.items()):
        n, b = dict(series["npu"]), dict(series["bench"])
        steps = sorted(set(n) | set(b))
        if not steps:
            continue
        p(f"  scalar at {site} (NPU | bench | rel diff), by step:")
        shown = steps if len(steps) <= most else \
            [steps[round(i * (len(steps) - 1) / (most - 1))] for i in range(most)]
        for s in shown:
            nv, bv = n.get(s), b.get(s)
            rel = ""
            if _number(nv) and _number(bv):
                rel = fmt(_rel(nv - bv, bv))
            p(f"    {s:>6}  {fmt(nv):>14}  {fmt(bv):>14}  {rel}")


def plot(res, path):
    """curves.png of the scalar curves, when matplotlib is installed."""
    series = [(rank, site, s) for rank, c in sorted(res.curves.items())
              for site, s in sorted(c.items()) if s["npu"] or s["bench"]]
    if not series:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(len(series), 1, figsize=(7, 2.8 * len(series)), squeeze=False)
    for ax, (rank, site, s) in zip(axes[:, 0], series):
        for side, style in (("npu", "-"), ("bench", "--")):
            points = [(x, y) for x, y in s[side] if _number(y)]
            if points:
                ax.plot(*zip(*points), style, label="NPU" if side == "npu" else "bench")
        ax.set_title(f"rank {rank}: {site}")
        ax.set_xlabel("step")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
