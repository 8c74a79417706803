"""The answer's text, once for every format: its table (:func:`grid`), a line per pick, per
change and per place (:mod:`cryptcost.analysis.answer` finds them), the terminal's last screen
built from them, and its chart."""

from __future__ import annotations


from cryptcost.analysis.answer import Answer, Change, Place, Use

# the fastest ciphers the terminal lists (the report lists every one)
CIPHERS_SHOWN = 3


def named(o) -> str:
    """An option's stack, with its CPU count where the run pinned every pass of it."""
    return o.stack + (f" on {o.cpus} CPU{'s' if o.cpus > 1 else ''}" if o.cpus else "")


def mb(bps: float) -> str:
    return f"{bps / 1e6:,.0f}" if bps >= 10e6 else f"{bps / 1e6:.1f}"


def pick(u: Use, fact: bool = True) -> str:
    """The pick and why, in one sentence (``fact``: with the security fact it must repeat)."""
    lead = u.why if u.pick else f"no pick, {u.why}"
    return f"{u.title}: {lead}" + (f"; {u.fact}" if fact and u.fact else "") + "."


def change(n: int, c: Change) -> str:
    return f"{n}. {c.action}: up to ×{c.win:.1f} ({c.evidence})"


def place(p: Place) -> str:
    speed = f"{p.bytes_per_s / 1e6:,.0f} MB/s"
    if p.named:
        return f"{p.name} ({p.said})"
    if p.kind == "storage":
        return f"{p.name} ({p.said}): {speed} read, timed read-only, its writes taken as fast"
    return f"{p.name}: {speed}, {p.said}"


def heading(a: Answer) -> str:
    where = [place(p) for p in a.places]
    return ("Predicted on " + "; ".join(where) + ".") if where else \
        "No disk or link speed is known here: each figure is as measured (RAM medium, netns link)."


# the terminal's short name of each use, its first column
USE_SHORT = {"whole-disk": "whole disk", "per-directory": "per directory",
             "any-filesystem": "any fs", "file-share": "file share", "site-to-site": "tunnel",
             "remote-access": "remote", "service-tls": "service TLS", "cipher": "cipher"}
OWN_SAID = "own: the encryption's share of its cost against plain, the rest its layer's"


def grid(a: Answer, ciphers: int | None = None, places: int = 3, rest: bool = False
         ) -> tuple[list[str], list[list[str]]]:
    """The answer's table for every format: its headers and one row of texts per option (the
    pick starred; a use's name on its first row only). ``ciphers``: how many ciphers to list;
    ``places``: on how many disks and links to predict (the first found, then those named);
    ``rest``: a column for what else costs beside the encryption (its twin's layer)."""
    storage = [p.name for p in a.places if p.kind == "storage"]
    network = [p.name for p in a.places if p.kind == "network"]
    shown = (storage[:max(1, places - 1)] + network[:1])[:places] if network else \
        storage[:places]
    heads = (["use", "", "option", "here MB/s"] + [f"on {n}" for n in shown]
             + ["own"] + (["the rest"] if rest else []) + ["limits it", "CPU-s/GB"])
    rows = []
    for u in a.uses:
        opts = u.options[:ciphers] if u.use == "cipher" and ciphers else u.options
        for i, o in enumerate(opts):
            figures = {p.place: p for p in o.on}
            on = [(mb(f.low) if mb(f.low) == mb(f.high) else f"{mb(f.low)}–{mb(f.high)}")
                  if (f := figures.get(n)) else "" for n in shown]
            rows.append([USE_SHORT.get(u.use, u.use) if i == 0 else "", "★" if o.pick else "",
                         named(o), "/".join(mb(v) for _, v in o.here), *on,
                         f"{o.own:.0%}" if o.own is not None else "",
                         *([o.other] if rest else []),
                         o.limit.replace("(write)", "(w)").replace("(read)", "(r)"),
                         f"{o.cpu_s_per_gb:.2f}" if o.cpu_s_per_gb is not None else ""])
    return heads, rows


def legend(a: Answer) -> str:
    """What the table's columns mean, in a sentence or two."""
    return (f"{heading(a)} Columns: here, as measured (write/read; RAM medium, netns link); "
            f"on a disk or link, predicted; {OWN_SAID}.")


def screen(a: Answer, title: str) -> list:
    """The terminal's last screen: one row per option (the pick starred), where its figures are
    predicted, the picks and why, and what to change; at most 40 lines at 100 columns."""
    from rich.markup import escape
    from rich.table import Table
    t = Table(title=f"[bold]The answer[/bold] — {escape(title)}", title_justify="left",
              box=None, pad_edge=False, padding=(0, 1, 0, 0), header_style="bold underline")
    heads, rows = grid(a, ciphers=CIPHERS_SHOWN, places=3)
    for h in heads:
        right = h not in ("use", "", "option", "limits it")
        t.add_column(h, justify="right" if right else "left", overflow="fold",
                     max_width=34 if h == "option" else None)
    for r in rows:
        t.add_row(*map(escape, r))
    out: list = [t, f"[dim]{escape(legend(a))}[/dim]"]
    out += [f"★ {escape(pick(u, fact=False))}" for u in a.uses]
    if a.changes:
        out.append("[bold]What to change[/bold], largest win first:")
        out += [f"  {escape(change(n, c))}" for n, c in enumerate(a.changes[:3], 1)]
    out += [f"[dim]• {escape(n)}[/dim]" for n in a.notes]
    return out


def chart(a: Answer) -> str | None:
    """The answer's chart: each option's slower main op as measured here beside its baseline's
    (grey), its predicted range on each place (a whisker at the place's colour), and each
    disk's and link's speed as a dashed line; a log scale, since a RAM medium runs at memory
    speed and a disk at its own."""
    from cryptcost.report.charts import BASE_COLOUR, COLOURS, _mbs as mbs_
    from cryptcost.report.svg import plt, svg
    opts = [(u, o) for u in a.uses if u.use != "cipher" for o in u.options if o.here]
    if not opts:
        return None
    fig, ax = plt.subplots(figsize=(8.5, 0.27 * len(opts) + 1.1))
    places = list(a.places)
    colour = {p.name: COLOURS[2 + i % (len(COLOURS) - 2)] for i, p in enumerate(places)}
    labels = []
    for i, (u, o) in enumerate(opts):
        op, here = min(o.here, key=lambda x: x[1])
        base = dict(o.plain).get(op)
        if base:
            ax.barh(i - 0.2, mbs_(base), height=0.35, color=BASE_COLOUR)
        ax.barh(i + 0.2, mbs_(here), height=0.35, color=COLOURS[0])
        for p in o.on:
            ax.errorbar([(mbs_(p.low) + mbs_(p.high)) / 2], [i + 0.2],
                        xerr=[[(mbs_(p.high) - mbs_(p.low)) / 2]] * 2, fmt="D", ms=4,
                        color=colour.get(p.place, COLOURS[3]), capsize=3)
        labels.append(f"{'★ ' if o.pick else ''}{named(o)} ({op})")
    for p in places:
        ax.axvline(mbs_(p.bytes_per_s), color=colour[p.name], ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_yticks(range(len(opts)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("MB/s, log scale: the option's slower op here (blue), its baseline (grey), "
                  "predicted on a place (◆ range)")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=COLOURS[0], label="measured here"),
                       Patch(color=BASE_COLOUR, label="its baseline here")]
              + [Line2D([], [], color=colour[p.name], ls="--", marker="D", ms=4,
                        label=f"{p.name}: {mbs_(p.bytes_per_s):,.0f} MB/s") for p in places],
              loc="lower right", fontsize=8)
    return svg(fig)
