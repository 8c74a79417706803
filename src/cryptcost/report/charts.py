"""Charts as inline SVG strings (matplotlib), for the self-contained HTML report.

Every chart has units on its axes, axis labels and a legend; CI whiskers
where a confidence interval exists. Output is deterministic for the same
data (fixed SVG hash salt, no dates in metadata).
"""

from __future__ import annotations

from cryptcost.analysis.scaling import Curve
from cryptcost.record import Stored, read
from cryptcost.report import answer, flame
from cryptcost.report.svg import plt, svg as _svg

BASE_COLOUR = "#9e9e9e"
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f"]


def _mbs(v: float | None) -> float:
    return (v or 0) / 1e6


def _err(r: Stored) -> tuple[float, float]:
    lo, hi = r.ci95 or (r.bytes_per_s, r.bytes_per_s)
    m = r.bytes_per_s
    return max(0.0, _mbs(m - lo)), max(0.0, _mbs(hi - m))


def throughput_vs_baseline(storage: list[Stored], workload: str = "seq",
                           block: int = 1 << 20) -> str | None:
    """Median throughput per stack (write and read), baselines in grey, CI whiskers."""
    rows = [r for r in storage if r.cell.workload == workload and r.cell.block_bytes == block
            and r.bytes_per_s is not None and r.cell.op in ("write", "read")]
    if not rows:
        return None
    baselines = {r.stack for r in rows if r.facts.is_baseline}
    stacks = sorted({r.stack for r in rows}, key=lambda s: (s not in baselines, s))
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(stacks) + 1.2))
    height = 0.38
    for j, op in enumerate(("write", "read")):
        ys, xs, errs, colours = [], [], [[], []], []
        for i, stack in enumerate(stacks):
            r = next((x for x in rows if x.stack == stack and x.cell.op == op), None)
            if not r:
                continue
            ys.append(i + (j - 0.5) * height)
            xs.append(_mbs(r.bytes_per_s))
            lo, hi = _err(r)
            errs[0].append(lo)
            errs[1].append(hi)
            colours.append(BASE_COLOUR if r.facts.is_baseline else COLOURS[j])
        ax.barh(ys, xs, height=height, xerr=errs, color=colours, capsize=2,
                label=op, hatch=None if j == 0 else "//", edgecolor="white")
    ax.set_yticks(range(len(stacks)), stacks)
    ax.invert_yaxis()
    ax.set_xlabel(f"throughput, MB/s ({workload}, {block // 1024} KiB blocks; whiskers: 95 % CI)")
    ax.set_ylabel("stack")
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=COLOURS[0], label="write"),
                       Patch(color=COLOURS[1], hatch="//", label="read"),
                       Patch(color=BASE_COLOUR, label="baseline")], loc="lower right")
    return _svg(fig)


def overhead(storage: list[Stored]) -> str | None:
    """Overhead against the matched baseline, % (positive = slower), with CI."""
    rows = [r for r in storage if r.overhead is not None and not r.facts.is_baseline
            and r.cell.op in ("write", "read")]
    if not rows:
        return None
    labels = [f"{r.stack} {r.cell.workload} {r.cell.op} {_block(r.cell.block_bytes)}" for r in rows]
    vals = [r.overhead * 100 for r in rows]
    errs = [[max(0, v - r.overhead_ci95[0] * 100) for v, r in zip(vals, rows)],
            [max(0, r.overhead_ci95[1] * 100 - v) for v, r in zip(vals, rows)]]
    colours = [COLOURS[3] if r.overhead_significant else BASE_COLOUR for r in rows]
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(rows) + 1.2))
    ax.barh(range(len(rows)), vals, xerr=errs, color=colours, capsize=2)
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("overhead against the matched baseline, % "
                  "(1 − stack/baseline; whiskers: 95 % CI)")
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=COLOURS[3], label="significant"),
                       Patch(color=BASE_COLOUR,
                             label="no significant difference, or untested (one sample)")],
              loc="lower right")
    return _svg(fig)


def cpu_cost(storage: list[Stored]) -> str | None:
    """System-wide CPU-seconds per GiB moved, per stack and operation."""
    rows = [r for r in storage if r.cpu_s_per_gib and r.cell.op in ("write", "read")
            and r.cell.block_bytes == max(x.cell.block_bytes for x in storage)]
    if not rows:
        return None
    stacks = sorted({r.stack for r in rows})
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(stacks) + 1.2))
    for j, op in enumerate(("write", "read")):
        vals = [next((r.cpu_s_per_gib for r in rows if r.stack == s and r.cell.op == op),
                     0) for s in stacks]
        ax.barh([i + (j - 0.5) * 0.38 for i in range(len(stacks))], vals, height=0.38,
                color=COLOURS[j], label=op)
    ax.set_yticks(range(len(stacks)), stacks)
    ax.invert_yaxis()
    ax.set_xlabel("CPU-seconds per GiB moved, whole system "
                  f"({_block(rows[0].cell.block_bytes)} blocks)")
    ax.set_ylabel("stack")
    ax.legend(loc="lower right")
    return _svg(fig)


def block_size_curves(storage: list[Stored]) -> str | None:
    """Throughput against block size (the R3 sweep), one line per stack."""
    rows = [r for r in storage if r.cell.workload == "seq" and r.bytes_per_s is not None]
    sizes = sorted({r.cell.block_bytes for r in rows})
    if len(sizes) < 3:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), sharey=True)
    # one line per stack and CPU count (a run may measure both on 1 and on 2 CPUs)
    lines = sorted({(r.stack, r.cell.cpus or 0) for r in rows}, key=lambda x: (x[0], x[1]))
    lines = [ln for ln in lines if len({r.cell.block_bytes for r in rows
                                        if (r.stack, r.cell.cpus or 0) == ln}) >= 3]
    for ax, op in zip(axes, ("write", "read")):
        for i, (stack, cpus) in enumerate(lines):
            pts = sorted((r.cell.block_bytes, _mbs(r.bytes_per_s)) for r in rows
                         if r.stack == stack and (r.cell.cpus or 0) == cpus and r.cell.op == op)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3,
                        linestyle="--" if cpus == 1 else "-", color=COLOURS[i % len(COLOURS)],
                        label=stack + (f" ({cpus} CPU{'s' if cpus > 1 else ''})" if cpus else ""))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes, [_block(s) for s in sizes], rotation=45)
        ax.set_xlabel("block size")
        ax.set_title(f"sequential {op}")
    axes[0].set_ylabel("throughput, MB/s (log)")
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _svg(fig)


def ciphers(cipher_rows: list[Stored]) -> str | None:
    """Raw cipher speed, acceleration on vs off (one thread, largest common buffer)."""
    rows = [r for r in cipher_rows if r.cell.threads == 1]
    if not rows:
        return None
    size = max({r.cell.buffer_bytes for r in rows},
               key=lambda s: sum(1 for r in rows if r.cell.buffer_bytes == s))
    rows = [r for r in rows if r.cell.buffer_bytes == size]
    labels = sorted({f"{r.cell.engine} {r.cell.algorithm}" for r in rows})
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(labels) + 1.2))
    for j, accel in enumerate((True, False)):
        vals = [next((_mbs(r.bytes_per_s) for r in rows
                      if f"{r.cell.engine} {r.cell.algorithm}" == lab and r.cell.accel == accel),
                     0) for lab in labels]
        if any(vals):
            ax.barh([i + (j - 0.5) * 0.4 for i in range(len(labels))], vals, height=0.4,
                    color=COLOURS[j * 3],
                    label="acceleration on" if accel else "acceleration off")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel(f"throughput, MB/s (log; {_block(size)} buffers, one thread)")
    ax.legend(loc="lower right")
    return _svg(fig)


def core_scaling(cipher_rows: list[Stored]) -> str | None:
    """Raw cipher speed against thread count."""
    threads = sorted({r.cell.threads for r in cipher_rows})
    if len(threads) < 2:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.4))
    size = min({r.cell.buffer_bytes for r in cipher_rows}, key=lambda s: abs(s - 4096))
    series = sorted({(r.cell.engine, r.cell.algorithm, r.cell.buffer_bytes,
                      r.cell.accel) for r in cipher_rows
                     if r.cell.buffer_bytes == size})
    for i, (engine, alg, size, accel) in enumerate(series[:10]):
        pts = sorted((r.cell.threads, _mbs(r.bytes_per_s)) for r in cipher_rows
                     if (r.cell.engine, r.cell.algorithm, r.cell.buffer_bytes,
                         r.cell.accel) == (engine, alg, size, accel))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                color=COLOURS[i % len(COLOURS)],
                label=f"{alg} {_block(size)}{'' if accel else ' no-accel'}")
    ax.set_xticks(threads)
    ax.set_xlabel(f"threads (openssl speed -multi), {_block(size)} buffers")
    ax.set_ylabel("throughput, MB/s")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _svg(fig)


def stack_scaling(curves: list[Curve]) -> dict[str, str]:
    """One chart per stack (R3): throughput against CPU count, one line per
    cell with acceleration on (solid) and off (dashed), CI whiskers; a point
    where the cipher was the bottleneck is filled, any other hollow. Only
    stacks with two or more points to draw."""
    out = {}
    for stack in sorted({c.stack for c in curves}):
        mine = [c for c in curves if c.stack == stack and len(c.points) > 1][:6]
        if not mine:
            continue
        counts = sorted({p.cpus or 0 for c in mine for p in c.points})
        xs = {n: i for i, n in enumerate(counts)}
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        for i, c in enumerate(mine):
            for accel in (True, False):
                pts = [p for p in c.points if p.accel == accel]
                if not pts:
                    continue
                x = [xs[p.cpus or 0] + (0 if accel else 0.06) for p in pts]
                y = [_mbs(p.bytes_per_s) for p in pts]
                lo = [max(0.0, y_ - _mbs((p.ci95 or [p.bytes_per_s] * 2)[0]))
                      for y_, p in zip(y, pts)]
                hi = [max(0.0, _mbs((p.ci95 or [p.bytes_per_s] * 2)[1]) - y_)
                      for y_, p in zip(y, pts)]
                colour = COLOURS[i % len(COLOURS)]
                ax.errorbar(x, y, yerr=[lo, hi], color=colour, linestyle="-" if accel else "--",
                            capsize=3,
                            label=f"{c.cell}, acceleration {'on' if accel else 'off'}")
                for xi, yi, p in zip(x, y, pts):
                    ax.plot([xi], [yi], marker="o", markersize=6, color=colour,
                            markerfacecolor=colour if p.bottleneck == "cipher" else "white")
        ax.set_xticks(range(len(counts)), [str(n) if n else "all" for n in counts])
        ax.set_xlabel("CPUs (filled marker: the cipher is the bottleneck)")
        ax.set_ylabel("throughput, MB/s")
        ax.set_ylim(bottom=0)
        ax.set_title(stack)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        out[stack] = _svg(fig)
    return out


def _block(n: int) -> str:
    if not n:
        return ""
    return (f"{n // (1 << 20)} MiB" if n >= 1 << 20 else f"{n // 1024} KiB" if n >= 1024
            else f"{n} B")


def network_throughput(network: list[Stored]) -> str | None:
    """Gbit/s per network stack and workload (one stream or file), baselines in grey, CI
    whiskers."""
    rows = [r for r in network if r.bytes_per_s and (r.cell.streams or 1) == 1]
    if not rows:
        return None
    labels = [f"{r.stack} {r.cell.workload}" for r in rows]
    vals = [r.bytes_per_s * 8 / 1e9 for r in rows]
    errs = [[max(0.0, (r.bytes_per_s - (r.ci95 or (r.bytes_per_s,) * 2)[0]) * 8 / 1e9)
             for r in rows],
            [max(0.0, ((r.ci95 or (0, r.bytes_per_s))[1] - r.bytes_per_s) * 8 / 1e9)
             for r in rows]]
    colours = [BASE_COLOUR if r.facts.is_baseline else COLOURS[0] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(rows) + 1.2))
    ax.barh(range(len(rows)), vals, xerr=errs, color=colours, capsize=2)
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("throughput, Gbit/s, log scale "
                  "(both ends on this host's CPUs; whiskers: 95 % CI)")
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=COLOURS[0], label="encrypted"),
                       Patch(color=BASE_COLOUR, label="baseline")],
              loc="lower right")
    return _svg(fig)


def network_cpu(network: list[Stored]) -> str | None:
    """CPU-seconds per GB at each end (and what no process accounts for), per network result."""
    rows = [r for r in network if r.cpu_s_per_gb.get("a") is not None
            and (r.cell.streams or 1) == 1]
    if not rows:
        return None
    labels = [f"{r.stack} {r.cell.workload}" for r in rows]
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(rows) + 1.2))
    left = [0.0] * len(rows)
    for j, (key, name) in enumerate((("a", "end a (client)"), ("b", "end b (server)"),
                                     ("unattributed", "kernel, softirq (no process)"))):
        vals = [(r.cpu_s_per_gb.get(key) or 0) for r in rows]
        ax.barh(range(len(rows)), vals, left=left, color=COLOURS[j], label=name)
        left = [x + v for x, v in zip(left, vals)]
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("CPU-seconds per GB moved, by end (the figure that carries over to real hosts)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return _svg(fig)


def fleet_overhead(doc: dict) -> str | None:
    """A fleet: each result's overhead against its baseline, one bar per host, solid where
    significant."""
    rows = [r for r in doc["rows"] if any(h["overhead"] is not None for h in r["hosts"].values())]
    columns = [c["label"] for c in doc["columns"]]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8, (0.22 * len(columns) + 0.12) * len(rows) + 1.4))
    height = 0.8 / len(columns)
    for j, host in enumerate(columns):
        ys, xs, colours = [], [], []
        for i, row in enumerate(rows):
            got = row["hosts"].get(host)
            if got is None or got["overhead"] is None:
                continue
            ys.append(i + (j - (len(columns) - 1) / 2) * height)
            xs.append(got["overhead"] * 100)
            colours.append(COLOURS[j % len(COLOURS)] if got["significant"] else BASE_COLOUR)
        ax.barh(ys, xs, height=height, color=colours, edgecolor=COLOURS[j % len(COLOURS)],
                linewidth=0.6)
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows])
    ax.invert_yaxis()
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("overhead against the matched baseline, % (1 − stack/baseline)")
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=COLOURS[j % len(COLOURS)], label=h)
                       for j, h in enumerate(columns)]
              + [Patch(color=BASE_COLOUR, label="not significant (outlined in its host's colour)")],
              loc="lower right")
    return _svg(fig)


def field_table(t: dict) -> str | None:
    """A field report's own table as bars: ours per row and column (hatched where emulated),
    and each row of theirs only — a reference line of their chart, such as R2's gigabit
    Ethernet — as a dashed line at its figure in each column."""
    rows = [r for r in t["rows"] if any(c["ours"] is not None for c in r["cells"])]
    lines = [r for r in t["rows"] if all(c["ours"] is None for c in r["cells"])
             and r["name"] != t["reference"] and "reference line" in r["name"]]
    if not rows or not lines:
        return None
    cols = [j for j, _ in enumerate(t["columns"]) if any(r["cells"][j]["ours"] is not None
                                                          for r in rows)]
    width = 0.8 / len(cols)
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) * len(cols) + 1.5))
    for k, j in enumerate(cols):
        for i, r in enumerate(rows):
            c = r["cells"][j]
            if c["ours"] is not None:
                ax.barh(i + k * width, c["ours"], height=width, color=COLOURS[k],
                        hatch="//" if c["emulated"] else None,
                        label=t["columns"][j] if i == 0 else None)
        for n, line in enumerate(lines):
            value = line["cells"][j]["theirs"]
            if value is not None:
                ax.axvline(value, color=COLOURS[k], linestyle=("--", ":")[n % 2], linewidth=1)
                ax.annotate(f"{line['name'].split(' (')[0]}: {value:g}", (value, len(rows) - 0.5),
                            rotation=90, fontsize=7, va="bottom", ha="right")
    ax.set_yticks([i + width * (len(cols) - 1) / 2 for i in range(len(rows))],
                  [r["name"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"{t['unit']} here (hatched: emulated); lines: their reference figures")
    ax.legend(loc="lower right", fontsize=8)
    return _svg(fig)


def all_charts(results: list[dict] | list[Stored], doc=None) -> dict:
    """Every chart of a run's report; ``doc``: its :class:`~cryptcost.report.records.Document`
    (the answer's, the scaling's, the layers' and the field reports' charts need it)."""
    results = read(results)
    storage = [r for r in results if r.kind == "storage"]
    network = [r for r in results if r.kind == "network"]
    cipher_rows = [r for r in results if r.kind == "cipher"]
    charts = {
        "answer": answer.chart(doc.answer) if doc is not None and doc.answer else None,
        "throughput": throughput_vs_baseline(storage),
        "throughput_4k": throughput_vs_baseline(storage, block=4096),
        "overhead": overhead(storage),
        "cpu": cpu_cost(storage),
        "block_sizes": block_size_curves(storage),
        "ciphers": ciphers(cipher_rows),
        "core_scaling": core_scaling(cipher_rows),
        "network": network_throughput(network),
        "network_cpu": network_cpu(network),
        "per_stack": stack_scaling(doc.scaling if doc is not None else []),
        "flames": flame.graphs(storage + network),
        "layers": flame.layer_bars(doc.storage + doc.network if doc is not None else ()),
        # a chart per field report's own table that has one, by report and the table's place
        "field_tables": {f"{b['label']}:{i}": svg
                         for b in (doc.field_reports if doc is not None else ())
                         for i, t in enumerate(b.get("tables", []))
                         if (svg := field_table(t))},
    }
    return {k: v for k, v in charts.items() if v}
