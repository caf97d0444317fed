"""The numbers a script reads from tensors (its loss, printed or logged),
as curves: each value a call site reads, in the order it reads them, on
each side; text in the summary and ``curves.png`` (with matplotlib).

A curve's points are counted by read, not by step: a script that never
calls ``optimizer.step()`` (word_language_model updates its parameters by
hand) reads all its numbers in step 0, and a site read several times a
step (a loss per micro-batch) keeps them all."""

import math
import os


def fmt(v):
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else str(v)


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def short_site(site):
    """file:line by the file's name: the two runs may run copies in two
    places."""
    if not site:
        return "?"
    path, _, line = site.rpartition(":")
    return f"{os.path.basename(path)}:{line}"


def series(dumps):
    """{rank: {site: {side: [(step, value), ...]}}} of {side: dumps.Dump}."""
    out = {}
    for side, dump in dumps.items():
        for (rank, step), part in sorted(dump.parts.items()):
            for s in part.scalars:
                site = short_site(s.get("site"))
                sides = out.setdefault(rank, {}).setdefault(site, {k: [] for k in dumps})
                sides[side].append((step, s.get("value")))
    return out


def _rel(a, b):
    if not (_number(a) and _number(b)):
        return None
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    return abs(a - b) / abs(b) if b != 0 else math.inf


def text(p, curves, most=12):
    """The curves of one rank, side by side: up to ``most`` reads of each
    site, spread over the run, the first and the last among them."""
    for site, sides in sorted(curves.items()):
        names = list(sides)
        count = max(len(v) for v in sides.values())
        if not count:
            continue
        labels = " | ".join("NPU" if n == "npu" else n for n in names)
        rel = len(names) == 2
        p(f"  {site}: {count} reads ({labels}" + (" | rel diff" if rel else "") + ")")
        shown = range(count) if count <= most else \
            sorted({round(i * (count - 1) / (most - 1)) for i in range(most)})
        for i in shown:
            values = [sides[n][i] if i < len(sides[n]) else (None, None) for n in names]
            step = next((s for s, _ in values if s is not None), "")
            cells = "".join(f"  {fmt(v):>14}" for _, v in values)
            extra = ""
            if rel:
                r = _rel(values[0][1], values[1][1])
                extra = f"  {fmt(r)}" if r is not None else ""
            p(f"    #{i:<5} step {step:<5}{cells}{extra}")


def plot(curves, path):
    """curves.png of {rank: {site: {side: [(step, value)]}}}, when
    matplotlib is installed: x is the read's number at its site."""
    panels = [(rank, site, s) for rank, c in sorted(curves.items())
              for site, s in sorted(c.items()) if any(s.values())]
    if not panels:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.8 * len(panels)), squeeze=False)
    for ax, (rank, site, sides) in zip(axes[:, 0], panels):
        for (side, points), style in zip(sides.items(), ("-", "--", ":")):
            xy = [(i, v) for i, (_, v) in enumerate(points) if _number(v)]
            if xy:
                ax.plot(*zip(*xy), style, label="NPU" if side == "npu" else side)
        ax.set_title(f"rank {rank}: {site}")
        ax.set_xlabel("read")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
