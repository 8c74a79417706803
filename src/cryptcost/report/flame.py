"""Where a stack's CPU time went, drawn from its profiles: a flame graph per stack, from
the folded stacks, and the layers' shares of each profiled cell beside its baseline's.

Each profiled cell stores its call stacks folded (``engines.perf.fold``:
``command;outermost;…;leaf`` → samples, on every CPU during its passes). A
stack's cells are summed into one graph: each frame a box as wide as the
samples it was on, its callers below it, its callees above; the colour is the
layer the frame belongs to (``analysis.profile``: the cipher, copies, FUSE,
the page cache, the block layer…). The idle loop is left out and said in the
title: the graph is of the busy CPU. Drawn with matplotlib as inline SVG,
deterministic for the same data: its text as text, its boxes as one raster image under it (a
profiled small-files cell has some 1700 boxes, 300 KB as SVG paths, tens of KB as an image).
"""

from __future__ import annotations

from cryptcost.analysis.profile import layer
from cryptcost.record import ProfileRow, Stored

# One colour per layer (analysis.profile.LAYERS), the cipher the one that stands out.
COLOURS = {"cipher": "#d62728", "copy": "#ff7f0e", "fuse": "#9467bd", "page cache": "#2ca02c",
           "block": "#17becf", "network": "#e377c2", "syscall, TUN": "#7f7f7f",
           "memory": "#aec7e8",
           "measuring tool": "#c7c7c7", "stack (user)": "#1f77b4",
           "kernel, other": "#bcbd22", "user, other": "#8c564b", "idle": "#eeeeee"}
MIN_LABEL = 0.04          # a box narrower than this share of the graph gets no label
MIN_BOX = 0.0005          # nor is one narrower than this drawn: under a tenth of a pixel wide
MAX_DEPTH = 42


def by_stack(results: list[Stored]) -> dict[str, dict[str, int]]:
    """The folded stacks of each stack's profiled cells, summed, idle left out."""
    out: dict[str, dict[str, int]] = {}
    for r in results:
        for key, n in (r.profile.folded if r.profile else {}).items():
            mine = out.setdefault(r.stack, {})
            mine[key] = mine.get(key, 0) + n
    return out


def _layer(frame: str, comm: str) -> str:
    if frame.endswith("_[k]"):
        return layer(ProfileRow(comm, sym=frame[:-4], where="kernel"))
    if frame.startswith("["):
        return layer(ProfileRow(comm, dso=frame.strip("[]"), where="user"))
    return layer(ProfileRow(comm, sym=frame, where="user"))


def _idle(key: str) -> bool:
    """A stack that ends in the idle loop (or is the idle task's)."""
    comm, leaf = key.split(";", 1)[0], key.rsplit(";", 1)[-1]
    return layer(ProfileRow(comm, sym=leaf.removesuffix("_[k]"), where="kernel")) == "idle"


def _tree(folded: dict[str, int]) -> dict:
    root: dict = {"n": 0, "kids": {}}
    for key, n in folded.items():
        node = root
        node["n"] += n
        for frame in key.split(";")[:MAX_DEPTH]:
            node = node["kids"].setdefault(frame, {"n": 0, "kids": {}})
            node["n"] += n
    return root


def draw(stack: str, folded: dict[str, int]) -> str | None:
    """The flame graph of one stack, as an SVG string (None when there is nothing busy)."""
    from matplotlib.collections import PolyCollection

    from cryptcost.report.svg import plt, svg as _svg
    total = sum(folded.values())
    root = _tree({k: n for k, n in folded.items() if not _idle(k)})
    if not root["n"]:
        return None
    boxes = []                              # (depth, left, width, frame, layer)

    def walk(node: dict, depth: int, left: float, comm: str) -> None:
        x = left
        for frame, kid in sorted(node["kids"].items()):
            width = kid["n"] / root["n"]
            c = frame if depth == 0 else comm
            lay = "user, other" if depth == 0 else _layer(frame, c)
            boxes.append((depth, x, width, frame, lay))
            walk(kid, depth + 1, x, c)
            x += width
    walk(root, 0, 0.0, "")
    depth = max(b[0] for b in boxes) + 1
    drawn = [b for b in boxes if b[2] >= MIN_BOX]
    fig, ax = plt.subplots(figsize=(9, 0.2 * depth + 1.3))
    # one collection for every box: a patch each made the graph of a busy stack take seconds
    ax.add_collection(PolyCollection(
        [((x, d - 0.46), (x + w, d - 0.46), (x + w, d + 0.46), (x, d + 0.46))
         for d, x, w, _, _ in drawn],
        facecolors=[COLOURS.get(lay, "#999999") for *_, lay in drawn], edgecolors="white",
        linewidths=0.3, rasterized=True))
    for d, x, w, frame, _ in drawn:
        if w >= MIN_LABEL:
            chars = max(1, int(w * 150))
            ax.text(x + 0.003, d, frame if len(frame) <= chars else frame[:chars - 1] + "…",
                    va="center", ha="left", fontsize=6, clip_on=True)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.6, depth - 0.4)
    ax.set_yticks([])
    ax.set_xlabel(f"share of the busy CPU samples ({root['n']} of {total}; the rest idle), "
                  "callers below, callees above")
    ax.set_title(f"{stack}: where the busy CPU went in its profiled passes", loc="left", fontsize=9)
    shown = sorted({b[4] for b in drawn if b[0]}, key=list(COLOURS).index)
    _legend(ax, shown)
    return _svg(fig)


def _legend(ax, shown: list[str]) -> None:
    """The layers drawn, in the table's order, to the right of the chart."""
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=COLOURS[lay], label=lay) for lay in shown], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, title="layer",
              title_fontsize=7)


def graphs(results: list[Stored]) -> dict[str, str]:
    """A flame graph per stack that was profiled, by stack."""
    out = {}
    for stack, folded in sorted(by_stack(results).items()):
        svg = draw(stack, folded)
        if svg:
            out[stack] = svg
    return out


def layer_bars(rows) -> str | None:
    """One stacked bar per profiled result (the report's storage and network rows, records,
    that carry ``layers``): the busy CPU's shares by layer, each cell's results together,
    baselines first."""
    from cryptcost.report.svg import plt, svg as _svg
    rows = [r for r in rows if r.layers]
    if not rows:
        return None

    def op(r) -> str:
        return getattr(r, "op", r.workload)
    rows = sorted(rows, key=lambda r: (r.workload, op(r), getattr(r, "block", ""),
                                       r.role != "baseline", r.stack))
    labels = [" ".join(x for x in (r.stack, op(r), getattr(r, "block", ""))
                       if x and x != "—") for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.26 * len(rows) + 1.2))
    left = [0.0] * len(rows)
    shown = [lay for lay in COLOURS if lay != "idle" and any(r.layers.get(lay) for r in rows)]
    for lay in shown:
        vals = [r.layers.get(lay, 0.0) for r in rows]
        ax.barh(range(len(rows)), vals, left=left, color=COLOURS[lay], edgecolor="white",
                linewidth=0.3)
        left = [x + v for x, v in zip(left, vals)]
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the busy CPU in each profiled cell, by layer "
                  "(perf; the idle loop left out)")
    _legend(ax, shown)
    return _svg(fig)
