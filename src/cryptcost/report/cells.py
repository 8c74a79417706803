"""Finding a comparison's cells in a run: a side's dimensions (a list of values: candidates in
order, taken at the same place on both sides), the cell whose dimensions they are, and its pair on
the same medium — for a field report's figures and tables, and for its claims."""

from __future__ import annotations

from dataclasses import fields

from cryptcost.model import Cell
from cryptcost.record import Stored
from cryptcost.workloads.storage import Sizes, r1_files

# A dimension of the data beside a cell's own: R1's first, second or third file (its 1, 5 and
# 10 GB), whatever size the run's medium gave it (workloads.storage.r1_files)
R1_FILE = "r1_file"
KNOWN = {f.name for f in fields(Cell)} | {R1_FILE}


def choices(side: dict) -> int:
    return max([len(v) for v in side.values() if isinstance(v, list)] or [1])


def at(side: dict, i: int) -> dict:
    return {k: (v[i] if i < len(v) else v[-1]) if isinstance(v, list) else v
            for k, v in side.items()}


# Dimensions that take a measurement away from the report's conditions, in words: a result with
# one set stands only for a figure that names it.
CONDITIONS = {"delay_ms": "a delay on the link"}


def has(r: Stored, want: dict) -> bool:
    """Whether ``r`` was measured and its cell has every dimension ``want`` names."""
    return r.median is not None and all(
        (r1_file(r.cell) if k == R1_FILE else getattr(r.cell, k)) == v for k, v in want.items())


# What a storage figure's two sides share, whatever the figure names: the same medium, of the
# same size, with the same filesystem
SAME_MEDIUM = ("medium", "size", "fs")


def r1_file(cell: Cell) -> int | None:
    """Which of R1's files (1, 2, 3) a storage cell's workload is, on its medium's size."""
    if not (cell.workload or "").startswith("bigfile-") or not cell.size:
        return None
    names = [name for _, name, _ in r1_files(Sizes(medium=cell.size))]
    return names.index(cell.workload) + 1 if cell.workload in names else None


def held(r: Stored, want: dict) -> list[str]:
    """The conditions ``r`` was measured under that ``want`` does not name, in words."""
    return [said for k, said in CONDITIONS.items() if k not in want and getattr(r.cell, k)]


def find(results: list[Stored], want: dict, label: str) -> Stored | None:
    """The result whose cell has every dimension ``want`` names, and no condition it does not
    name: a whole series before one cut short (``incomplete``), its own part's first, then the
    plainest (the fewest dimensions set beyond those)."""
    hits = [r for r in results if has(r, want) and not held(r, want)]
    hits.sort(key=lambda r: (bool(r.incomplete), not (r.cell.part or "").startswith(label),
                             sum(v is not None for v in r.cell.fields().values()),
                             r.cell.cpus or 0))
    return hits[0] if hits else None


def pair(shared: dict, a: dict, b: dict | None, pool: list[Stored], label: str,
         need_b: bool = True, medium: tuple[str, ...] = SAME_MEDIUM
         ) -> tuple[Stored, Stored | None] | None:
    """The first place among the candidates (a list of values: in order, at the same place on
    both sides) where ``pool`` holds ``a``'s cell, and ``b``'s beside it on the same medium
    (``medium``: the dimensions that must be the same; without ``need_b``, ``b``'s where it has
    one)."""
    for i in range(max(choices(a), choices(b or {}))):
        x = find(pool, {**shared, **at(a, i)}, label)
        same = {k: v for k in medium if (v := getattr(x.cell, k, None)) is not None} \
            if x else {}
        y = find(pool, {**same, **shared, **at(b, i)}, label) if b is not None else None
        if x and (not need_b or (y and y.median)):
            return x, y
    return None


def candidates(shared: dict, *sides: dict) -> list[dict]:
    """Every cell a figure or a table's cell may be read from: each side's candidates, in
    order, with what they share."""
    return [at({**shared, **side}, i) for side in sides if side is not None
            for i in range(max(choices(shared), choices(side)))]


def dims(want: dict) -> str:
    """A cell's dimensions in a few words: ``nfs:krb5p put``, ``openssl aes-256-xts 4096 B
    1 thread(s) accel off``."""
    said = [str(want[k]) for k in ("stack", "engine", "algorithm", "workload", "op") if k in want]
    said += [f"{want[k]} B" for k in ("block_bytes", "buffer_bytes") if k in want]
    said += [f"{want['threads']} thread(s)"] if "threads" in want else []
    said += [f"accel {'on' if want['accel'] else 'off'}"] if "accel" in want else []
    return " ".join(said)
