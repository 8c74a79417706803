"""Tables for the terminal (rich). Pure: data in, renderable out."""

from __future__ import annotations

from typing import Callable

from rich.console import Group
from rich.markup import escape
from rich.table import Table


from cryptcost.record import Stored, read
from cryptcost.report.document import (UNSTABLE_INTRO, cipher_row, network_row, storage_row,
                                       unstable_groups)
from cryptcost.report.records import Document, NetworkRow, SplitRow, StorageRow, UnstableGroup


def probe_tables(info: dict) -> list:
    """The probe as a list of rich renderables."""
    cpu = info["cpu"]
    host = Table(title="Host", show_header=False, title_justify="left")
    flags = " ".join(f"{k}{'' if v else '✗'}" for k, v in cpu["flags"].items())
    mem = info["memory"]
    clock = f"{cpu['mhz']} MHz" if cpu.get("mhz") else "unknown"
    for key, value in [
        ("CPU", f"{cpu['model']} — {cpu['cores']} logical cores ({cpu['cores_usable']} usable)"),
        ("flags", flags + "   (✗ = absent)"),
        ("governor / clock", f"{cpu.get('governor') or 'not exposed'} / {clock}"),
        ("memory",
         f"{mem['total'] / 2**30:.1f} GiB total, {mem['available'] / 2**30:.1f} GiB available"),
        ("kernel", info["kernel"]["release"]),
        ("root", "yes" if info["root"] else "no"),
    ]:
        host.add_row(key, value)
    drivers = Table(title="Kernel crypto drivers (/proc/crypto, highest priority)",
                    title_justify="left")
    for col in ("algorithm", "driver", "priority", "implementation"):
        drivers.add_column(col)
    for name, d in info["crypto_drivers"].items():
        if d["type"] in ("skcipher", "cipher", "aead", "shash") or name.startswith(("hmac", "sha")):
            drivers.add_row(name, d["driver"], str(d["priority"]), d["implementation"])
    feats = Table(title="Kernel features", title_justify="left")
    feats.add_column("feature")
    feats.add_column("present")
    for name, f in info["features"].items():
        feats.add_row(name, "yes" if f["present"] else "[red]no[/red]")
    tools = Table(title="Tools", title_justify="left")
    tools.add_column("tool")
    tools.add_column("version")
    for name, version in info["tools"].items():
        tools.add_row(name, version or "[dim]not installed[/dim]")
    out = [host, drivers, feats, tools]
    if "stacks" in info:
        stacks = Table(title="Stacks", title_justify="left")
        for col in ("stack", "kind", "status"):
            stacks.add_column(col)
        for s in info["stacks"]:
            install = f" (install: {s['install']})" if s.get("install") else ""
            status = ("[green]available[/green]" if s["available"]
                      else f"[red]unavailable[/red]: {s['reason']}{install}")
            stacks.add_row(s["name"], s["kind"], status)
        out.append(stacks)
    return out


def cipher_table(results: list[dict] | list[Stored], title: str = "Raw cipher throughput") -> Table:
    """One row per cipher result, fastest first within each engine."""
    table = Table(title=title, title_justify="left")
    for col, just in (("engine", "left"), ("algorithm", "left"), ("buffer", "right"),
                      ("threads", "right"), ("accel", "left"), ("median", "right"),
                      ("95 % CI", "right"), ("n", "right"), ("note", "left")):
        table.add_column(col, justify=just)
    for r in sorted(read(results), key=lambda r: (r.cell.engine, r.cell.algorithm,
                                                  r.cell.buffer_bytes, r.cell.threads,
                                                  not r.cell.accel)):
        c = cipher_row(r)
        table.add_row(c.engine, c.algorithm, c.buffer, str(c.threads), c.accel,
                      c.median,
                      c.ci, str(c.n), c.note)
    return table


def skipped_table(skipped: list[dict]) -> Table:
    table = Table(title="Not measured", title_justify="left")
    table.add_column("what")
    table.add_column("why", overflow="fold")
    seen = set()
    for s in skipped:
        what = " ".join(str(s[k]) for k in ("engine", "stack", "algorithm", "workload") if s.get(k))
        why = s["reason"] + (f" (install: {s['install']})" if s.get("install") else "")
        if (what, why) not in seen:
            seen.add((what, why))
            table.add_row(what, why)
    return table


def result_tables(results: list[dict] | list[Stored]) -> list:
    """Tables for a run's results, one per kind present."""
    results = read(results)
    tables = []
    ciphers = [r for r in results if r.kind == "cipher"]
    if ciphers:
        tables.append(cipher_table(ciphers))
    storage = [r for r in results if r.kind == "storage"]
    if storage:
        tables.append(storage_table(storage))
    network = [r for r in results if r.kind == "network"]
    if network:
        tables.append(network_table(network))
    return tables + unstable_lines(unstable_groups(results))


def unstable_lines(groups: list[UnstableGroup] | tuple[UnstableGroup, ...]) -> list[str]:
    """What the mark beside an interval means, and each cause once."""
    if not groups:
        return []
    return [UNSTABLE_INTRO] + [f"  • {g.text}" for g in groups]


def storage_table(results: list[dict] | list[Stored],
                  title: str = "Storage stacks against their baselines") -> Table:
    """One row per storage result; overhead against the matched baseline."""
    table = Table(title=title, title_justify="left")
    for col, just in (("stack", "left"), ("workload", "left"), ("op", "left"), ("block", "right"),
                      ("QD", "right"), ("median", "right"), ("95 % CI", "right"), ("IOPS", "right"),
                      ("CPU-s/GiB", "right"), ("vs baseline", "right"), ("n", "right"),
                      ("cache", "left")):
        table.add_column(col, justify=just)
    for r in read(results):
        row = storage_row(r)
        table.add_row(row.stack, row.workload, row.op, row.block, str(row.qd),
                      row.median,
                      row.ci, row.iops, row.cpu_s_per_gib, row.vs, str(row.n),
                      row.cache)
    return table


def network_table(results: list[dict] | list[Stored],
                  title: str = "Network stacks against their baselines",
                  rows: list[NetworkRow] | tuple[NetworkRow, ...] | None = None) -> Table:
    """One row per network result: throughput, CPU-seconds per GB at each end, the wire check."""
    table = Table(title=title, title_justify="left")
    for col, just in (("stack", "left"), ("workload", "left"), ("median", "right"),
                      ("95 % CI", "right"),
                      ("CPU-s/GB a", "right"), ("CPU-s/GB b", "right"), ("CPU-s/GB all", "right"),
                      ("retrans", "right"), ("packet", "right"), ("wire", "left"),
                      ("vs baseline", "right"),
                      ("n", "right")):
        table.add_column(col, justify=just)
    for row in rows if rows is not None else [network_row(r) for r in read(results)]:
        workload = row.workload + (f" ×{row.streams}" if row.streams > 1 else "")
        table.add_row(row.stack, workload, f"{row.median} ({row.gbit})", row.ci,
                      row.cpu_a,
                      row.cpu_b, row.cpu_system, row.retransmits, row.packet,
                      row.wire, row.vs,
                      str(row.n))
    return table


NARROW = 120       # a narrower terminal gets the results grouped by stack, not in one wide table
SPLIT_TITLE = "Cost split: reference → twin → stack (share of the cost against the reference)"
NETWORK_TITLE = ("Network: each stack against plain TCP on the same link (both ends share this "
                 "host's CPUs: compare CPU-s/GB, not Gbit/s)")
PEER_TITLE = ("Network: each stack against plain TCP on the same link (a peer's link: "
              "CPU-s/GB is each end's own)")


def _network_title(rows: list[NetworkRow]) -> str:
    """The shared-CPU caveat only where no result crossed to a peer."""
    return PEER_TITLE if any(" to " in r.link for r in rows) else NETWORK_TITLE


def _against(r: StorageRow | NetworkRow) -> str:
    """A result's stack, and the baseline it is compared against where it is."""
    return r.stack + (f"  (vs {r.against})" if r.against else "")


def _vs(r: StorageRow | NetworkRow) -> str:
    return r.change


def _split_chain(x: SplitRow) -> str:
    return " → ".join(f"{x.figures[k] / 1e6:.0f}"
                      for k in ("reference_bytes_per_s", "twin_bytes_per_s", "stack_bytes_per_s"))


# The columns of each kind's rows in a narrow terminal, the stack's name above them.
STORAGE_NARROW = [
    ("op", lambda r: " ".join(x for x in (r.workload, r.op, r.block) if x and x != "—")),
    ("median", lambda r: r.median), ("95 % CI", lambda r: r.ci), ("vs baseline", _vs),
    ("CPU-s/GiB", lambda r: r.cpu_s_per_gib), ("bottleneck", lambda r: r.bottleneck)]
SPLIT_NARROW = [
    ("op", lambda x: f"{x.op} {x.block}"), ("MB/s ref→twin→stack", _split_chain),
    ("total", lambda x: x.total), ("twin's", lambda x: x.shared),
    ("own", lambda x: x.own if not x.note else "not meaningful")]
NETWORK_NARROW = [
    ("workload", lambda r: r.workload + (f" ×{r.streams}" if r.streams > 1 else "")),
    ("median", lambda r: r.gbit), ("95 % CI", lambda r: r.ci),
    ("CPU-s/GB a+b", lambda r: f"{r.cpu_a}+{r.cpu_b}"), ("wire", lambda r: r.wire),
    ("vs baseline", _vs)]
CIPHERS_NARROW = [
    ("algorithm", lambda c: c.algorithm), ("buffer", lambda c: c.buffer),
    ("threads", lambda c: str(c.threads)), ("acceleration", lambda c: c.accel),
    ("median", lambda c: c.median), ("95 % CI", lambda c: c.ci)]


def by_stack(title: str, rows, columns: list[tuple[str, Callable[..., str]]],
             heading: Callable[..., str]) -> Group:
    """Rows grouped under their stack's name, each group a table of ``columns`` (header, value)
    with the same column widths, so that a long stack name never squeezes the figures; the last
    column wraps."""
    from rich.text import Text
    values = [[get(r) for _, get in columns] for r in rows]
    widths = [max([len(h)] + [len(v[i]) for v in values]) for i, (h, _) in enumerate(columns)]
    parts: list = [Text(title, style="italic")]
    groups: dict[str, list[list[str]]] = {}
    for r, v in zip(rows, values):
        groups.setdefault(heading(r), []).append(v)
    for n, (name, vals) in enumerate(groups.items()):
        t = Table(box=None, show_header=n == 0, header_style="bold underline", pad_edge=False,
                  padding=(0, 2, 0, 0))
        for i, ((header, _), w) in enumerate(zip(columns, widths)):
            last = i == len(columns) - 1              # the last column wraps: sentences go there
            t.add_column(header, width=None if last else w, min_width=min(w, 12) if last else None,
                         no_wrap=not last, overflow="fold" if last else "ellipsis")
        for v in vals:
            t.add_row(*v)
        parts += [Text(name, style="bold", overflow="fold"), t]
    return Group(*parts)


def summary_tables(doc: Document, width: int | None = None, details: bool = False) -> list:
    """The terminal summary of a run, the answer last (:func:`cryptcost.report.answer.screen`,
    one screen); with ``details``, first the ranking and the findings, each result with its
    bottleneck, the cost split, acceleration and cores, the network, the ciphers, the unstable
    results, each recommendation in full, and what was not measured. Below :data:`NARROW`
    columns the results are grouped by stack."""
    from cryptcost.report.answer import screen
    last = [f"[bold]{escape(doc.emulated)}[/bold]"] if doc.emulated else []
    last += screen(doc.answer, doc.title)
    if details:
        return details_tables(doc, width) + last
    told = [f"{n} {what}" for n, what in (
        (len(doc.findings), "findings"), (len(doc.unstable), "groups of unstable "
                                             "results"),
        (len(doc.not_measured), "things not measured"),
        (sum(1 for b in doc.field_reports if b["claims"]), "field reports judged"))
        if n]
    if told:
        last.append(f"[dim]{', '.join(told)}: --details shows them, and every result[/dim]")
    return last


def details_tables(doc: Document, width: int | None = None) -> list:
    """The details of a run, before its answer: the ranking and findings, the per-stack tables,
    the recommendations in full, what was not measured."""
    from rich.panel import Panel
    lead = []
    if doc.ranking:
        t = Table(title="Ranking: 1 MiB sequential throughput relative to plain",
                  title_justify="left")
        t.add_column("#", justify="right")
        t.add_column("stack")
        t.add_column("relative to plain", justify="right")
        for r in doc.ranking:
            t.add_row(r.rank, r.stack, r.relative)
        lead.append(t)
    lead += [f"! {escape(f)}" for f in doc.findings]
    out = []                                  # the details, after the answer
    measured = [r for r in doc.storage if r.role != "baseline"]
    narrow = width is not None and width < NARROW
    if measured and narrow:
        out.append(by_stack("Storage: each stack against its baseline", measured, STORAGE_NARROW,
                            heading=_against))
    elif measured:
        t = Table(title="Storage: each stack against its baseline", title_justify="left")
        for col in ("stack", "workload", "op", "block", "median", "95 % CI", "CPU-s/GiB",
                    "vs baseline", "bottleneck"):
            t.add_column(col)
        for r in measured:
            t.add_row(r.stack, r.workload, r.op, r.block, r.median, r.ci,
                      r.cpu_s_per_gib,
                      r.vs, r.bottleneck)
        out.append(t)
    if doc.split and narrow:
        out.append(by_stack(SPLIT_TITLE, doc.split, SPLIT_NARROW,
                            heading=lambda x: (f"{x.stack}  ({x.figures['reference']} → "
                                               f"{x.figures['twin']}, "
                                               f"which adds {x.isolates})")))
    elif doc.split:
        t = Table(title=SPLIT_TITLE, title_justify="left")
        for col in ("stack", "op", "block", "reference → twin → stack", "total", "the twin adds",
                    "share", "own"):
            t.add_column(col)
        for x in doc.split:
            t.add_row(x.stack, x.op, x.block, x.chain, x.total, x.isolates,
                      x.shared,
                      x.own if not x.note else "not meaningful")
        out.append(t)
    if doc.scaling_rows and narrow:
        out.append("[italic]Hardware AES and cores, per stack[/italic]")
        for x in doc.scaling_rows:                 # one line per figure: each is a sentence
            out.append(f"[bold]{escape(x['stack'])}[/bold] {escape(x['cell'])}")
            out += [f"  {name}: {escape(x[key])}" for name, key in (
                ("acceleration on", "on"), ("acceleration off", "off"),
                ("what it is worth", "worth"), ("from the fewest CPUs to the most", "scaling"),
                ("the cipher binds", "cipher_bound"))]
    elif doc.scaling_rows:
        t = Table(title="Hardware AES and cores, per stack", title_justify="left")
        for col in ("stack", "cell", "acceleration on", "acceleration off", "worth", "CPUs",
                    "cipher binds"):
            t.add_column(col)
        for x in doc.scaling_rows:
            t.add_row(x["stack"], x["cell"], x["on"], x["off"], x["worth"], x["scaling"],
                      x["cipher_bound"])
        out.append(t)
    if doc.network and narrow:
        out.append(by_stack(_network_title(doc.network), doc.network, NETWORK_NARROW,
                            heading=_against))
    elif doc.network:
        out.append(network_table([], title=_network_title(doc.network), rows=doc.network))
    if doc.network:
        verdicts = [r for r in doc.network if r.role != "baseline" and r.explanation]
        for r in verdicts:
            out.append(f"• {r.stack} {r.workload}: {r.explanation}")
    if doc.ciphers and narrow:
        out.append(by_stack("Raw ciphers", doc.ciphers, CIPHERS_NARROW,
                            heading=lambda c: c.engine))
    elif doc.ciphers:
        t = Table(title="Raw ciphers", title_justify="left")
        for col in ("engine", "algorithm", "buffer", "threads", "acceleration", "median",
                    "95 % CI"):
            t.add_column(col)
        for c in doc.ciphers:                 # as measured, engine by engine
            t.add_row(c.engine, c.algorithm, c.buffer, str(c.threads), c.accel,
                      c.median, c.ci)
        out.append(t)
    out += unstable_lines(doc.unstable)
    judged = [b for b in doc.field_reports if b["claims"]]
    if judged:
        out.append("[italic]Field reports: their claims judged here (cryptcost report --format "
                   "md shows each)[/italic]")
        out += [f"• {escape(b['verdicts'])}" for b in judged]
    for rec in doc.recommendations:
        out.append(Panel(escape(rec.text), title=escape(rec.title), title_align="left"))
    if doc.not_measured:
        out.append(skipped_table([{"stack": m.what, "reason": m.why, "install": m.install}
                                  for m in doc.not_measured]))
    return lead + out


def fleet_tables(doc: dict) -> list:
    """A fleet report (:func:`cryptcost.report.fleet.build`) as terminal tables and lines."""
    from cryptcost.report.fleet import cell_text
    cols = doc["columns"]
    out: list = []
    hosts = Table(title="Hosts", title_justify="left")
    for col in ("column", "run", "CPU", "cores", "crypto flags", "kernel"):
        hosts.add_column(col)
    for c in cols:
        hosts.add_row(c["label"], str(c["run"]), str(c["cpu"]), str(c["cores"]), c["crypto_flags"],
                      str(c["kernel"]) + (" (emulated)" if c["emulated"] else ""))
    out.append(hosts)
    if not doc["rows"]:
        out.append("no host returned a result")
    else:
        t = Table(title="The hosts side by side (median, and overhead against the baseline)",
                  title_justify="left")
        t.add_column("result")
        for c in cols:
            t.add_column(c["label"], justify="right")
        for row in doc["rows"]:
            t.add_row(row["label"], *(cell_text(row["hosts"].get(c["label"])) for c in cols))
        out.append(t)
    out += [escape(f"• {s}") for s in doc["differences"]]
    for rec in doc["recommendations"]:
        if rec["same"]:
            out.append(escape(f"{rec['title']} (every host; the figures are "
                              f"{rec['hosts'][0]['host']}'s): {rec['hosts'][0]['text']}"))
        else:
            out += [escape(f"{rec['title']}, on {h['host']}: {h['text']}") for h in rec["hosts"]]
    return out
