"""What the analysis knows of a stored result: the facts its stack declared,
and its cell (what it is paired and grouped on)."""

from __future__ import annotations

from cryptcost.model import Cell


def facts(r: dict) -> dict:
    """The facts the stack declared, as stored with the result."""
    return (r.get("params") or {}).get("facts") or {}


def is_baseline(r: dict) -> bool:
    """A plaintext reference, whether the run added it or the user asked for it."""
    return facts(r).get("role") == "baseline"


def cell(r: dict, **changes) -> Cell:
    """The cell a stored result is paired on; with ``changes``, the same cell of another stack
    (a baseline), op or block size. Acceleration is left out: an acceleration-off twin's label
    says so (``/accel-off``), and it is paired with baselines that run with it on."""
    return Cell.of(r).but(accel=None, **changes)
