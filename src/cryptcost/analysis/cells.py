"""What the analysis knows of a stored result: the facts its stack declared,
and the key that identifies its cell (what it is paired and grouped on)."""

from __future__ import annotations

# The fields that identify one storage cell within a run: a result is paired
# with its baseline, and grouped with its peers, only on all of them.
CELL = ("workload", "op", "block_bytes", "iodepth", "cpus", "part", "medium", "fs", "size", "link", "mtu", "streams")


def facts(r: dict) -> dict:
    """The facts the stack declared, as stored with the result."""
    return (r.get("params") or {}).get("facts") or {}


def is_baseline(r: dict) -> bool:
    """A plaintext reference, whether the run added it or the user asked for it."""
    return facts(r).get("role") == "baseline"


def cell_key(r: dict, **over) -> tuple:
    """(stack, every CELL field): the full pairing key of a storage result."""
    d = {**r, **over}
    return (d["stack"],) + tuple(d.get(k) for k in CELL)
