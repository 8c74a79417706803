"""A fleet's runs side by side: each measured result, one column per host (or per pair,
``A→B``, for the network across two hosts); what differs between the hosts, in sentences
that join an environment difference to the stacks whose cost moved with it; and each
host's recommendation, once where they agree.

Like :mod:`cryptcost.report.document`, the fleet document is plain data built from
stored runs; every format (terminal, Markdown, HTML, JSON) is a function of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptcost import units
from cryptcost.model import Run
from cryptcost.record import Host, Stored, read
from cryptcost.report import document
from cryptcost.report.records import Document
from cryptcost.report.compare import environment_diff, key

FORMAT_VERSION = 1
# a stack whose overhead differs by at least this many points between two hosts is named
SPREAD = 0.05
# at most this many stacks named per pair of hosts, the largest differences first
NAMED = 5
# what a CPU flag is called where people speak of it
FLAG_NAMES = {"aes": "AES-NI", "vaes": "VAES", "pclmulqdq": "PCLMULQDQ",
              "vpclmulqdq": "VPCLMULQDQ", "avx2": "AVX2", "avx512f": "AVX-512F",
              "avx512vl": "AVX-512VL", "sha_ni": "SHA-NI"}
# environment differences that change what encryption costs (tool versions are listed, not named)
MATTERS = ("CPU", "cores", "CPU flag ", "kernel", "kernel driver ")


@dataclass
class Member:
    """One column of a fleet report: a host's run, or a pair's network run (``pair``)."""

    label: str
    run: Run
    results: list[dict]               # as stored: the CSV export writes them as they are
    pair: bool = False

    @property
    def emulated(self) -> bool:
        return Host.of(self.run.host).emulated is not None


def differences(hosts: list[tuple[str, dict]]) -> dict[str, list[dict]]:
    """What differs in each host's environment from the first host's (CPU and its crypto flags,
    kernel, its crypto drivers, tools): what can make a stack cost more on one than another."""
    if not hosts:
        return {}
    first = hosts[0][1]
    return {name: [d for d in environment_diff(first, host) if d["what"] != "hostname"]
            for name, host in hosts[1:]}


def side_by_side(runs: list[tuple[str, list[Stored]]]) -> list[dict]:
    """Each measured result of any host, with every host's median and overhead beside it."""
    rows: dict = {}
    for host, results in runs:
        for r in read(results):
            if r.role != "measured":
                continue
            cell = key(r).but(peer=None, host=None)     # a column says which host and peer
            row = rows.setdefault(cell, {"cell": cell, "label": cell.label(), "hosts": {}})
            row["hosts"][host] = {"median": r.median, "per": r.per, "overhead": r.overhead,
                                  "baseline": r.baseline,
                                  "significant": r.overhead_significant}
    return sorted(rows.values(), key=lambda row: row["cell"].sort_key())


def build(members: list[Member]) -> dict:
    """Everything a fleet report shows, as plain data."""
    rows = side_by_side([(m.label, m.results) for m in members])
    hosts = [m for m in members if not m.pair]
    env = differences([(m.label, m.run.host) for m in hosts])
    docs = {m.label: document.build(m.run, m.results) for m in members}
    return {
        "format": "cryptcost-fleet-report", "version": FORMAT_VERSION,
        "title": "cryptcost fleet: " + ", ".join(m.label for m in members),
        "columns": [_column(m) for m in members],
        "rows": [{"label": r["label"], "hosts": r["hosts"]} for r in rows],
        "environment": env,
        "differences": sentences(members, rows, env),
        "recommendations": recommendations(members, docs),
        "not_measured": {m.label: docs[m.label].not_measured for m in members
                         if docs[m.label].not_measured},
    }


def _column(m: Member) -> dict:
    h = Host.of(m.run.host)
    return {"label": m.label, "run": m.run.id, "status": m.run.status, "pair": m.pair,
            "hostname": h.hostname, "cpu": h.cpu.model, "cores": h.cpu.cores,
            "crypto_flags": ", ".join(FLAG_NAMES.get(f, f) for f, on in
                                      h.cpu.flags.items() if on) or "none",
            "kernel": h.kernel, "emulated": document.emulated_why(h)}


def _env_clause(d: dict, first: str) -> str:
    what = d["what"]
    if what.startswith("CPU flag "):
        name = FLAG_NAMES.get(what[len("CPU flag "):], what[len("CPU flag "):])
        return f"no {name} ({first} has it)" if not d["b"] else f"{name} ({first} has not)"
    return f"{what} {d['b']} ({d['a']} on {first})"


def sentences(members: list[Member], rows: list[dict], env: dict[str, list[dict]]) -> list[str]:
    """Each host against the first: the environment differences that change what encryption
    costs, and the stacks whose overhead moved by SPREAD or more (the largest first)."""
    hosts = [m for m in members if not m.pair]
    if len(hosts) < 2:
        return []
    first = hosts[0]
    out = []
    for m in hosts[1:]:
        if m.emulated != first.emulated:
            out.append(f"{m.label} {'is' if m.emulated else 'is not'} emulated and "
                       f"{first.label} {'is' if first.emulated else 'is not'}: their speeds are "
                       "not compared")
            continue
        clauses = [_env_clause(d, first.label) for d in env.get(m.label, [])
                   if d["what"].startswith(MATTERS)]
        moved = []
        for row in rows:
            a, b = row["hosts"].get(first.label), row["hosts"].get(m.label)
            if not a or not b or a["overhead"] is None or b["overhead"] is None:
                continue
            gap = b["overhead"] - a["overhead"]
            if abs(gap) >= SPREAD and (a["significant"] or b["significant"]):
                moved.append((abs(gap), row["label"], b["overhead"], a["overhead"]))
        moved.sort(key=lambda x: -x[0])
        costs = "; ".join(f"{label} costs {units.pct(ob, signed=False)} there, "
                          f"{units.pct(oa, signed=False)} on {first.label}"
                          for _, label, ob, oa in moved[:NAMED])
        more = f" (and {len(moved) - NAMED} more)" if len(moved) > NAMED else ""
        if clauses and moved:
            out.append(f"{m.label} has {', '.join(clauses)}: {costs}{more}")
        elif clauses:
            out.append(f"{m.label} has {', '.join(clauses)}, yet no stack's overhead differs from "
                       f"{first.label}'s by {SPREAD * 100:.0f} points or more")
        elif moved:
            out.append(f"{m.label} differs from {first.label} in nothing cryptcost records (CPU, "
                       f"crypto flags, kernel, crypto drivers), yet {costs}{more}: rerun both "
                       "before reading it as the hosts'")
        else:
            out.append(f"{m.label} is like {first.label}: the same CPU, crypto flags, kernel and "
                       f"drivers, and no stack's overhead {SPREAD * 100:.0f} points apart")
    return out


def recommendations(members: list[Member], docs: dict[str, Document]) -> list[dict]:
    """Each use case's recommendation: once where every host picks the same stack, else one
    per host (a pair's network run recommends nothing of its own)."""
    hosts = [m.label for m in members if not m.pair]
    titles: list[str] = []
    picks: dict[str, dict[str, tuple[str | None, str]]] = {}
    for label in hosts:
        for rec in docs[label].recommendations:
            if rec.title not in picks:
                titles.append(rec.title)
                picks[rec.title] = {}
            picks[rec.title][label] = (rec.ranking[0].stack if rec.ranking else None, rec.text)
    out = []
    for title in titles:
        got = picks[title]
        # the same stack picked, or (where a use case ranks none) the same words
        chosen = {pick or text for pick, text in got.values()}
        same = len(got) == len(hosts) and len(chosen) == 1
        out.append({"title": title, "same": same,
                    "hosts": [{"host": h, "pick": got[h][0], "text": got[h][1]}
                              for h in hosts if h in got]})
    return out


def cell_text(got: dict | None) -> str:
    """One host's figure in a side-by-side table: its median, and its overhead."""
    if got is None:
        return "—"
    speed = (units.rate(got["median"]) if got["per"] == "bytes"
             else f"{got['median']:,.0f} op/s")
    if got["overhead"] is None:
        return speed
    return (f"{speed} ({got['overhead'] * 100:+.1f} %"
            + ("" if got["significant"] else " n.s.") + ")")
