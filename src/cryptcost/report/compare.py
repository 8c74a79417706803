"""Two runs (or two hosts) side by side: each result present in both, B
against A with significance, and what differs in their environments.

A result's interval sees only the noise inside its own run; between two
runs a shared host can move as a whole (bench/stability: on this VM the
cipher cells' medians moved a median −16 % between two quick runs five
minutes apart). So where both runs hold OpenSSL cipher cells, which depend
on nothing but the CPU, the comparison says how far the host's CPU moved
between them (:func:`host_move`), and marks each significant difference
that move could account for: the same direction, no larger.
"""

from __future__ import annotations

import statistics

from cryptcost import stats
from cryptcost.model import Cell
from cryptcost.record import Host, Stored, read

MOVE_CELLS = 3            # OpenSSL cells both runs need before the host's move is estimated
# a host whose cipher cells moved less than this between the runs held still
STILL = 0.02

def key(r: Stored) -> Cell:
    """The identity of a result across runs: its cell, whichever suite's part planned it."""
    return r.cell.but(part=None)


def environment_diff(a: dict | Host, b: dict | Host) -> list[dict]:
    """What differs between two hosts in ways that change encryption numbers."""
    a, b = Host.of(a), Host.of(b)
    diffs = []

    def put(what, x, y):
        if x != y:
            diffs.append({"what": what, "a": x, "b": y})
    put("hostname", a.hostname, b.hostname)
    put("CPU", a.cpu.model, b.cpu.model)
    put("cores", a.cpu.cores, b.cpu.cores)
    put("governor", a.cpu.governor, b.cpu.governor)
    for flag in sorted(set(a.cpu.flags) | set(b.cpu.flags)):
        put(f"CPU flag {flag}", a.cpu.flags.get(flag), b.cpu.flags.get(flag))
    put("kernel", a.kernel, b.kernel)
    for tool in sorted(set(a.tools) | set(b.tools)):
        put(f"tool {tool}", a.tools.get(tool), b.tools.get(tool))
    for alg in sorted(set(a.crypto_drivers) & set(b.crypto_drivers)):
        put(f"kernel driver {alg}", a.crypto_drivers[alg].driver, b.crypto_drivers[alg].driver)
    return diffs


def host_move(results_a: list[dict] | list[Stored],
              results_b: list[dict] | list[Stored]) -> dict | None:
    """How far the host's CPU moved from run A to run B: the median B/A
    ratio of the OpenSSL cipher cells both runs measured (``ratio``), their
    range (``low``, ``high``) and how many (``cells``); None with fewer than
    MOVE_CELLS such cells."""
    by_a = {key(r): r for r in read(results_a) if r.kind == "cipher" and r.cell.engine == "openssl"}
    ratios = sorted(rb.bytes_per_s / ra.bytes_per_s for rb in read(results_b)
                    if (ra := by_a.get(key(rb))) and rb.bytes_per_s and ra.bytes_per_s)
    if len(ratios) < MOVE_CELLS:
        return None
    return {"ratio": statistics.median(ratios), "low": ratios[0], "high": ratios[-1],
            "cells": len(ratios)}


def within_move(ratio: float, move: dict | None) -> bool:
    """Whether a B/A ``ratio`` lies between 1 and the host's own move (the
    same direction, no larger): a difference the host alone could make."""
    if not move or abs(move["ratio"] - 1) <= STILL:
        return False
    return min(1.0, move["ratio"]) <= ratio <= max(1.0, move["ratio"])


def compare_runs(results_a: list[dict] | list[Stored], results_b: list[dict] | list[Stored],
                 move: dict | None = None) -> list[dict]:
    """Each result present in both runs: B against A, with significance; a
    significant difference the host's own ``move`` (:func:`host_move`)
    could make says so (``host_could``)."""
    by_a = {key(r): r for r in read(results_a)}
    rows = []
    for rb in read(results_b):
        ra = by_a.get(key(rb))
        if not ra or ra.per != rb.per or ra.median is None or rb.median is None:
            continue
        va, vb = ra.values or [ra.median], rb.values or [rb.median]
        cmp = stats.compare(list(va), list(vb))
        rows.append({"result": key(rb).label(), "a": ra.median, "b": rb.median,
                     "unit": rb.per + "/s",
                     "ratio": cmp.ratio, "ratio_ci95": list(cmp.ratio_ci95),
                     "significant": cmp.significant,
                     "verdict": cmp.verdict,
                     "host_could": cmp.significant and within_move(cmp.ratio, move)})
    return rows
