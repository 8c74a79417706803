"""The five field reports cryptcost was built from, laid beside a run's results.

Each report's figures are data (``report/seeds/R1.toml`` … ``R5.toml``: what was
measured, their figure, the conditions, the source text). A figure names the
comparison that carries across hardware — an overhead against a baseline, or a
ratio between two cells (AES-NI on against off, two cores against one) — and
the cells of a cryptcost run that give the same comparison: ``cell`` (what both
sides share) and ``a``, ``b`` (each side's own dimensions). Where a dimension
lists several values, they are candidates in order, taken at the same place on
both sides (the kernel's dm-crypt in a guest first, qemu's LUKS on this host
next). A report's block holds each figure beside its own, or says why this run
has none.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from importlib import resources

from cryptcost.model import Cell
from cryptcost.record import Stored
from cryptcost.report.absent import left_out
from cryptcost.workloads.storage import Sizes, r1_files

LABELS = ("R1", "R2", "R3", "R4", "R5")
# A dimension of the data beside a cell's own: R1's first, second or third file (its 1, 5 and
# 10 GB), whatever size the run's medium gave it (workloads.storage.r1_files)
R1_FILE = "r1_file"
_CELL = {f.name for f in fields(Cell)} | {R1_FILE}


@dataclass(frozen=True)
class Figure:
    what: str
    compare: str                          # overhead: 1 − a/b; ratio: a/b
    theirs: float                         # in the compared form
    theirs_said: str
    cell: dict
    a: dict
    b: dict
    note: str = ""


@dataclass(frozen=True)
class TableRow:
    name: str
    theirs: tuple[float | None, ...]      # one a column, in the table's unit ("" in the data: none)
    # what the row's cells add to each column's (a list: candidates in order, as a figure's);
    # None: a row of theirs only (a reference line of their chart)
    cell: dict | None


@dataclass(frozen=True)
class Table:
    """A report's own table: its rows and columns, their figures, and the cells that give ours;
    each figure also against the ``reference`` row's, the comparison that carries across
    hardware."""

    what: str
    unit: str                             # MB/s or Mbit/s
    columns: tuple[str, ...]
    cells: tuple[dict, ...]               # a column's cell dimensions
    rows: tuple[TableRow, ...]
    reference: str | None = None          # a row's name


@dataclass(frozen=True)
class Report:
    label: str
    title: str
    source: str
    hardware: str
    conclusion: str
    figures: tuple[Figure, ...] = ()
    no_figures: str = ""
    note: str = ""
    tables: tuple[Table, ...] = ()        # its own tables, in the order it drew them


def _theirs(d: dict) -> tuple[float, str]:
    """Their figure in the compared form, and as they gave it."""
    raw, unit = d["theirs"], d.get("unit", "")
    if isinstance(raw, list):
        a, b = raw
        value = 1 - a / b if d["compare"] == "overhead" else a / b
        return value, d.get("theirs_said") or f"{a:g} against {b:g} {unit}".rstrip()
    return float(raw), d.get("theirs_said") or f"{raw:g}"


def load(label: str) -> Report:
    """One report's figures, as the project keeps them."""
    if label not in LABELS:
        raise ValueError(f"no field report {label!r}")
    seeds = resources.files("cryptcost.report").joinpath("seeds")
    text = seeds.joinpath(f"{label}.toml").read_text()
    data = tomllib.loads(text)
    figures = []
    for d in data.get("figures", []):
        unknown = (set(d.get("cell", {})) | set(d["a"]) | set(d["b"])) - _CELL
        if unknown or d["compare"] not in ("overhead", "ratio"):
            raise ValueError(f"{label}: {d['what']}: bad figure ({unknown or d['compare']})")
        value, said = _theirs(d)
        figures.append(Figure(d["what"], d["compare"], value, said, d.get("cell", {}), d["a"],
                              d["b"], d.get("note", "")))
    return Report(data["label"], data["title"], data["source"], data["hardware"],
                  data["conclusion"], tuple(figures), data.get("no_figures", ""),
                  data.get("note", ""), tuple(_table(label, t) for t in data.get("tables", [])))


UNITS = {"MB/s": 1e6, "Mbit/s": 1e6 / 8}      # bytes/s in one unit


def _table(label: str, d: dict) -> Table:
    cols = tuple(d["columns"])
    rows = tuple(TableRow(r["name"], tuple(None if x == "" else float(x) for x in r["theirs"]),
                          r.get("cell")) for r in d["rows"])
    unknown = {k for c in d["cells"] for k in c} | {k for r in rows for k in r.cell or {}}
    if (unknown - _CELL or d["unit"] not in UNITS or len(d["cells"]) != len(cols)
            or any(len(r.theirs) != len(cols) for r in rows)
            or d.get("reference") not in {None} | {r.name for r in rows}):
        raise ValueError(f"{label}: bad table ({unknown - _CELL or d['unit']})")
    return Table(d["what"], d["unit"], cols, tuple(d["cells"]), rows, d.get("reference"))


def reports() -> list[Report]:
    return [load(label) for label in LABELS]


def _choices(side: dict) -> int:
    return max([len(v) for v in side.values() if isinstance(v, list)] or [1])


def _at(side: dict, i: int) -> dict:
    return {k: (v[i] if i < len(v) else v[-1]) if isinstance(v, list) else v
            for k, v in side.items()}


# Dimensions that take a measurement away from the report's conditions, in words: a result with
# one set stands only for a figure that names it.
CONDITIONS = {"delay_ms": "a delay on the link"}


def _has(r: Stored, want: dict) -> bool:
    """Whether ``r`` was measured and its cell has every dimension ``want`` names."""
    return r.median is not None and all(
        (_r1_file(r.cell) if k == R1_FILE else getattr(r.cell, k)) == v for k, v in want.items())


# What a storage figure's two sides share, whatever the figure names: the same medium, of the
# same size, with the same filesystem
SAME_MEDIUM = ("medium", "size", "fs")


def _r1_file(cell: Cell) -> int | None:
    """Which of R1's files (1, 2, 3) a storage cell's workload is, on its medium's size."""
    if not (cell.workload or "").startswith("bigfile-") or not cell.size:
        return None
    names = [name for _, name, _ in r1_files(Sizes(medium=cell.size))]
    return names.index(cell.workload) + 1 if cell.workload in names else None


def _held(r: Stored, want: dict) -> list[str]:
    """The conditions ``r`` was measured under that ``want`` does not name, in words."""
    return [said for k, said in CONDITIONS.items() if k not in want and getattr(r.cell, k)]


def _find(results: list[Stored], want: dict, label: str) -> Stored | None:
    """The result whose cell has every dimension ``want`` names, and no condition it does not
    name: a whole series before one cut short (``incomplete``), its own part's first, then the
    plainest (the fewest dimensions set beyond those)."""
    hits = [r for r in results if _has(r, want) and not _held(r, want)]
    hits.sort(key=lambda r: (bool(r.incomplete), not (r.cell.part or "").startswith(label),
                             sum(v is not None for v in r.cell.fields().values()),
                             r.cell.cpus or 0))
    return hits[0] if hits else None


@dataclass
class Row:
    figure: Figure
    ours: float | None = None
    a: Stored | None = None
    b: Stored | None = None
    why: str = ""
    emulated: bool = False                # both sides from a guest run linked to the run

    @property
    def incomplete(self) -> bool:
        """A side's series was cut short (its run ended first): shown, and said so."""
        return any(x is not None and x.incomplete for x in (self.a, self.b))

    def to_dict(self) -> dict:
        f = self.figure
        return {"what": f.what, "compare": f.compare, "theirs": f.theirs,
                "theirs_said": f.theirs_said, "theirs_shown": there(f), "ours": self.ours,
                "here": _here(self), "ours_cells": [x.cell.label() for x in (self.a, self.b) if x],
                "emulated": self.emulated, "incomplete": self.incomplete, "why_not": self.why,
                "note": f.note}


def _fmt(compare: str, value: float) -> str:
    """An overhead as how much slower (or faster), a ratio as a factor."""
    if compare == "overhead":
        return f"{abs(value) * 100:.0f} % {'slower' if value >= 0 else 'faster'}"
    return f"{value:.2f}×"


def there(f: Figure) -> str:
    """Their figure in the compared form, with how they gave it where that differs."""
    shown = _fmt(f.compare, f.theirs)
    return shown if f.theirs_said in (shown, f"{f.theirs:g}") else f"{shown} ({f.theirs_said})"


def _here(row: Row) -> str:
    if row.ours is None:
        return f"not in this run: {row.why}"
    return (_fmt(row.figure.compare, row.ours) + (" (emulated)" if row.emulated else "")
            + (" (incomplete: a series cut short)" if row.incomplete else ""))


def _pair(shared: dict, a: dict, b: dict | None, pool: list[Stored], label: str,
          need_b: bool = True) -> tuple[Stored, Stored | None] | None:
    """The first place among the candidates (a list of values: in order, at the same place on
    both sides) where ``pool`` holds ``a``'s cell, and ``b``'s beside it on the same medium
    (without ``need_b``, ``b``'s where it has one)."""
    for i in range(max(_choices(a), _choices(b or {}))):
        x = _find(pool, {**shared, **_at(a, i)}, label)
        same = {k: v for k in SAME_MEDIUM if (v := getattr(x.cell, k, None)) is not None} \
            if x else {}
        y = _find(pool, {**same, **shared, **_at(b, i)}, label) if b is not None else None
        if x and (not need_b or (y and y.median)):
            return x, y
    return None


def _candidates(shared: dict, *sides: dict) -> list[dict]:
    """Every cell a figure or a table's cell may be read from: each side's candidates, in
    order, with what they share."""
    return [_at({**shared, **side}, i) for side in sides if side is not None
            for i in range(max(_choices(shared), _choices(side)))]


def compare(report: Report, results: list[Stored],
            guests: list[list[Stored]] = (), skipped: list[dict] = ()) -> list[Row]:
    """Each figure of ``report`` beside the run's same comparison, or why it has none (from the
    run's record of what it left out, ``skipped``, where that says). Where the run has neither
    side's pair, a guest run linked to it (``guests``, each run's results) gives it, marked
    emulated: both sides always come from one run, on one host."""
    rows = []
    for f in report.figures:
        row = Row(f)
        for pool in [results, *guests]:
            pair = _pair(f.cell, f.a, f.b, pool, report.label)
            if pair:
                a, b = pair
                row.a, row.b, row.emulated = a, b, pool is not results
                ratio = a.median / b.median
                # the overhead the run itself reports, where paired
                paired = a.vs.get(b.stack)
                row.ours = (paired.overhead if paired and paired.overhead is not None
                            else 1 - ratio) \
                    if f.compare == "overhead" else ratio
                break
        else:
            every = [r for pool in [results, *guests] for r in pool]
            want = [{**f.cell, **_at(side, 0)} for side in (f.a, f.b)]
            missing = [w for w in want if not _find(every, w, report.label)]
            row.why = "no result for " + " nor ".join(_dims(w) for w in missing or want)
            held = sorted({said for w in missing or want for r in every if _has(r, w)
                           for said in _held(r, w)})
            if held:
                row.why += f" (only with {' and '.join(held)}, which this row does not have)"
            why = left_out(report.label, _candidates(f.cell, f.a, f.b), list(skipped))
            if why:
                row.why += f": {why}"
        rows.append(row)
    return rows


def _dims(want: dict) -> str:
    """A cell's dimensions in a few words: ``nfs:krb5p put``, ``openssl aes-256-xts 4096 B
    1 thread(s) accel off``."""
    said = [str(want[k]) for k in ("stack", "engine", "algorithm", "workload", "op") if k in want]
    said += [f"{want[k]} B" for k in ("block_bytes", "buffer_bytes") if k in want]
    said += [f"{want['threads']} thread(s)"] if "threads" in want else []
    said += [f"accel {'on' if want['accel'] else 'off'}"] if "accel" in want else []
    return " ".join(said)


def sentence(report: Report, rows: list[Row]) -> str:
    """Whether the report's comparisons come out the same here, in one sentence."""
    if not report.figures:
        return f"{report.label}: {report.no_figures}."
    seen = [r for r in rows if r.ours is not None]
    if not seen:
        return (f"{report.label}: none of its comparisons is in this run (`cryptcost run "
                "--suite seeds --vm` measures them, the kernel's stacks in its guest).")
    told = "; ".join(f"{r.figure.what}: {there(r.figure)} there, {_here(r)} here" for r in seen)
    return f"{report.label}: {told}."


def lay_out(t: Table, label: str, results: list[Stored], guests: list[list[Stored]] = (),
            skipped: list[dict] = ()) -> dict:
    """One of report ``label``'s own tables (``t``), with this run's figure beside each of
    theirs, each also against the reference row (from the same run, on one host); a linked
    guest run's where the run has none, marked emulated. A row with none of ours says why
    (``why_not``: see :func:`left_out`); a row of theirs alone (a reference line) has None."""
    ref = next((r for r in t.rows if r.name == t.reference), None)
    rows = []
    for row in t.rows:
        cells = []
        for j, column in enumerate(t.cells):
            theirs = row.theirs[j]
            cell = {"theirs": theirs, "theirs_vs": None, "ours": None, "ours_vs": None,
                    "ours_vs_stack": None, "emulated": False, "incomplete": False}
            if ref and theirs and ref.theirs[j]:
                cell["theirs_vs"] = theirs / ref.theirs[j]
            for pool in [results, *guests] if row.cell is not None else []:
                pair = _pair(column, row.cell, ref.cell if ref else None, pool, label,
                             need_b=False)
                if pair is None:
                    continue
                got, base = pair
                if (base is None or not base.median) and got.baseline:
                    # the reference on another filesystem (ZFS's own): its own matched baseline
                    # on its medium, named, where it has one
                    same = {k: v for k in SAME_MEDIUM if (v := getattr(got.cell, k)) is not None}
                    base = _find(pool, {**same, **column, "stack": got.baseline}, label)
                held = base is not None and bool(base.median)
                cell.update(ours=got.median / UNITS[t.unit], emulated=pool is not results,
                            ours_vs=got.median / base.median if held else None,
                            ours_vs_stack=base.stack if held else None,
                            incomplete=bool(got.incomplete or held and base.incomplete))
                break
            cells.append(cell)
        why = None
        if row.cell is not None and not any(c["ours"] is not None for c in cells):
            why = left_out(label, [c for column in t.cells
                                   for c in _candidates(column, row.cell)], skipped) \
                or "no result for " + _dims(_candidates(t.cells[0], row.cell)[0])
        rows.append({"name": row.name, "cells": cells, "why_not": why})
    return {"what": t.what, "unit": t.unit, "columns": list(t.columns),
            "reference": t.reference, "rows": rows,
            "measured": sum(c["ours"] is not None for r in rows for c in r["cells"])}


def table_text(cell: dict, side: str) -> str:
    """One side of a table's cell: ``259.4 (0.28×)``; ours with the stack it is held against,
    ``1.2 (0.95× tcp) emulated``, ``incomplete`` where a series was cut short; ``—`` where
    there is none."""
    value, vs = cell[side], cell[f"{side}_vs"]
    if value is None:
        return "—"
    # ours names the stack it is held against: a row's candidates each have their own
    against = f" {cell['ours_vs_stack']}" if side == "ours" and cell.get("ours_vs_stack") else ""
    out = f"{value:.1f}" + (f" ({vs:.2f}×{against})" if vs is not None else "")
    return (out + (" emulated" if side == "ours" and cell["emulated"] else "")
            + (" incomplete" if side == "ours" and cell.get("incomplete") else ""))


def section(results: list[Stored], guests: list[list[Stored]] = (),
            skipped: list[dict] = ()) -> list[dict]:
    """A block per field report: its source, hardware and conclusion, each figure beside
    this run's (or, where it has none, a linked guest run's: see :func:`compare`), and one
    sentence; a report none of whose comparisons this run holds is listed with that said."""
    out = []
    for report in reports():
        rows = compare(report, results, guests, skipped)
        out.append({"label": report.label, "title": report.title, "source": report.source,
                    "hardware": report.hardware, "conclusion": report.conclusion,
                    "note": report.note,
                    "measured": sum(1 for r in rows if r.ours is not None),
                    "rows": [r.to_dict() for r in rows], "sentence": sentence(report, rows),
                    "tables": [lay_out(t, report.label, results, guests, skipped)
                               for t in report.tables]})
    return out

