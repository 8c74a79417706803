"""A fleet's runs side by side: each measured result, one column per host (or per pair,
``A→B``, for the network across two hosts)."""

from __future__ import annotations

from cryptcost.record import Stored
from cryptcost.report.compare import environment_diff, key


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
        for r in results:
            if r.role != "measured":
                continue
            cell = key(r).but(peer=None)        # a pair's column says which peer
            row = rows.setdefault(cell, {"cell": cell, "label": _label(r), "hosts": {}})
            row["hosts"][host] = {"median": r.median, "per": r.per, "overhead": r.overhead,
                                  "baseline": r.baseline,
                                  "significant": r.overhead_significant}
    return sorted(rows.values(), key=lambda row: row["cell"].sort_key())


def _label(r: Stored) -> str:
    c = r.cell
    what = [c.stack or c.engine, c.algorithm, c.workload, c.op]
    if c.block_bytes:
        what.append(f"{c.block_bytes // 1024} KiB" if c.block_bytes >= 1024
                    else f"{c.block_bytes} B")
    if c.buffer_bytes:
        what.append(f"{c.buffer_bytes} B")
    if c.threads and c.threads > 1:
        what.append(f"{c.threads} threads")
    if c.accel is False:
        what.append("accel off")
    return " ".join(str(w) for w in what if w)
