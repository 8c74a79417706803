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
from dataclasses import dataclass
from importlib import resources

from cryptcost.record import Stored
from cryptcost.report import cells, claims
from cryptcost.report.claims import Claim
from cryptcost.report.absent import left_out
from cryptcost.report.cells import KNOWN as _CELL

LABELS = ("R1", "R2", "R3", "R4", "R5")


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
    where: str | None = None              # "guest": read only from guest runs (their setting)


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
    claims: tuple[Claim, ...] = ()        # its conclusions, each to be judged (report.claims)


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
                  data.get("note", ""), tuple(_table(label, t) for t in data.get("tables", [])),
                  tuple(claims.parse(label, c, _CELL) for c in data.get("claims", [])))


UNITS = {"MB/s": 1e6, "Mbit/s": 1e6 / 8,      # bytes/s in one unit
         "CPU-s/GiB": None}                       # a table of the CPU each cell cost


def _figure(r: Stored, unit: str) -> float | None:
    """A result's figure in a table's unit: its throughput, or the CPU-seconds it cost per GiB."""
    return r.cpu_s_per_gib if UNITS[unit] is None else r.median / UNITS[unit]


def _table(label: str, d: dict) -> Table:
    cols = tuple(d["columns"])
    rows = tuple(TableRow(r["name"], tuple(None if x == "" else float(x) for x in r["theirs"]),
                          r.get("cell")) for r in d["rows"])
    unknown = {k for c in d["cells"] for k in c} | {k for r in rows for k in r.cell or {}}
    if (unknown - _CELL or d["unit"] not in UNITS or len(d["cells"]) != len(cols)
            or any(len(r.theirs) != len(cols) for r in rows)
            or d.get("reference") not in {None} | {r.name for r in rows}
            or d.get("where") not in (None, "guest")):
        raise ValueError(f"{label}: bad table ({unknown - _CELL or d['unit']})")
    return Table(d["what"], d["unit"], cols, tuple(d["cells"]), rows, d.get("reference"),
                 d.get("where"))


def reports() -> list[Report]:
    return [load(label) for label in LABELS]


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
            found = cells.pair(f.cell, f.a, f.b, pool, report.label)
            if found:
                a, b = found
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
            want = [{**f.cell, **cells.at(side, 0)} for side in (f.a, f.b)]
            missing = [w for w in want if not cells.find(every, w, report.label)]
            row.why = "no result for " + " nor ".join(cells.dims(w) for w in missing or want)
            held = sorted({said for w in missing or want for r in every if cells.has(r, w)
                           for said in cells.held(r, w)})
            if held:
                row.why += f" (only with {' and '.join(held)}, which this row does not have)"
            why = left_out(report.label, cells.candidates(f.cell, f.a, f.b), list(skipped))
            if why:
                row.why += f": {why}"
        rows.append(row)
    return rows


def verdicts_said(label: str, judged: list[dict]) -> str:
    """How a report's claims came out here, in a line: ``R2: 8 claims: 2 hold, 3 do not hold,
    3 cannot be said here``."""
    n = {v: sum(c["verdict"] == v for c in judged) for v in claims.VERDICTS}
    said = [f"{n[claims.HOLDS]} hold" if n[claims.HOLDS] != 1 else "1 holds",
            f"{n[claims.DOES_NOT]} do not hold" if n[claims.DOES_NOT] != 1 else "1 does not hold",
            f"{n[claims.CANNOT]} cannot be said here"]
    return f"{label}: {len(judged)} claim{'s' if len(judged) != 1 else ''}: " + ", ".join(said)


def lay_out(t: Table, label: str, results: list[Stored], guests: list[list[Stored]] = (),
            skipped: list[dict] = ()) -> dict:
    """One of report ``label``'s own tables (``t``), with this run's figure beside each of
    theirs, each also against the reference row (from the same run, on one host); a linked
    guest run's where the run has none, marked emulated. A row with none of ours says why
    (``why_not``: see :func:`left_out`); a row of theirs alone (a reference line) has None."""
    ref = next((r for r in t.rows if r.name == t.reference), None)
    rows = []
    for row in t.rows:
        got_cells = []
        for j, column in enumerate(t.cells):
            theirs = row.theirs[j]
            cell = {"theirs": theirs, "theirs_vs": None, "ours": None, "ours_vs": None,
                    "ours_vs_stack": None, "emulated": False, "incomplete": False}
            if ref and theirs and ref.theirs[j]:
                cell["theirs_vs"] = theirs / ref.theirs[j]
            pools = list(guests) if t.where == "guest" else [results, *guests]
            for pool in pools if row.cell is not None else []:
                found = cells.pair(column, row.cell, ref.cell if ref else None, pool, label,
                                   need_b=False)
                if found is None:
                    continue
                got, base = found
                if (base is None or not base.median) and got.baseline:
                    # the reference on another filesystem (ZFS's own): its own matched baseline
                    # on its medium, named, where it has one
                    same = {k: v for k in cells.SAME_MEDIUM
                            if (v := getattr(got.cell, k)) is not None}
                    base = cells.find(pool, {**same, **column, "stack": got.baseline}, label)
                held = base is not None and bool(_figure(base, t.unit))
                cell.update(ours=_figure(got, t.unit), emulated=pool is not results,
                            ours_vs=_figure(got, t.unit) / _figure(base, t.unit)
                            if held and _figure(got, t.unit) else None,
                            ours_vs_stack=base.stack if held else None,
                            incomplete=bool(got.incomplete or held and base.incomplete))
                break
            got_cells.append(cell)
        why = None
        if row.cell is not None and not any(c["ours"] is not None for c in got_cells):
            why = left_out(label, [c for column in t.cells
                                   for c in cells.candidates(column, row.cell)], skipped) \
                or "no result for " + cells.dims(cells.candidates(t.cells[0], row.cell)[0])
        rows.append({"name": row.name, "cells": got_cells, "why_not": why})
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
        judged = [claims.judge(c, report.label, results, guests, skipped) for c in report.claims]
        out.append({"label": report.label, "title": report.title, "source": report.source,
                    "hardware": report.hardware, "conclusion": report.conclusion,
                    "note": report.note,
                    "measured": sum(1 for r in rows if r.ours is not None),
                    "rows": [r.to_dict() for r in rows], "claims": judged,
                    "verdicts": verdicts_said(report.label, judged),
                    "tables": [lay_out(t, report.label, results, guests, skipped)
                               for t in report.tables]})
    return out


def grid(blocks: list[dict]) -> list[dict]:
    """The claims of every report block, a row each: report, claim, verdict, where judged."""
    return [{"report": b["label"], "id": c["id"], "claim": c["claim"], "verdict": c["verdict"],
             "where": ", ".join(c["where"]) or "—"} for b in blocks for c in b["claims"]]

