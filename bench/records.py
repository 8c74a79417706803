#!/usr/bin/env python3
"""The benches' records, and bench/README.md's table of their latest results.

Each bench appends one JSON line per run to ``bench/records/NAME.jsonl``:
when, at which commit, on which CPU, its goal, whether it was met, and its
figures (each with its interval and verdict where the bench has them). The
history stays there, for anyone who wants to plot it; bench/README.md shows
the latest record of each bench, between its ``<!-- records -->`` markers,
made from the records alone:

    python3 bench/records.py          # remake the table from bench/records/
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORDS = HERE / "records"
README = HERE / "README.md"
BEGIN, END = "<!-- records -->", "<!-- /records -->"


def _commit(here: Path = HERE) -> str | None:
    """HEAD's commit, with ``+dirty`` when the code or the benches differ from it, a new file
    not yet added included (what a bench writes, its records and this README, aside): a record
    of a tree with changes not committed is not a record of that commit."""
    done = subprocess.run(
        ["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True
    )
    commit = done.stdout.strip() or None
    changed = subprocess.run(
        ["git", "-C", str(here.parent), "status", "--porcelain", "--", "src", "bench",
         ":!bench/records", ":!bench/README.md"], capture_output=True, text=True).stdout.strip()
    return f"{commit}+dirty" if commit and changed else commit


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def figure(cell: str, value: float | str, unit: str = "", ci95: list | tuple | None = None,
           verdict: str | None = None) -> dict:
    """One figure of a bench: a ratio, a time, a share; its interval and verdict where known."""
    return {
        "cell": cell, "value": value, "unit": unit, "ci95": list(ci95) if ci95 else None,
        "verdict": verdict,
    }


def record(bench: str, goal: str, met: bool, figures: list[dict], directory: Path | None = None,
           note: str | None = None) -> Path:
    """Append this run of ``bench`` to its records; with the default directory, remake
    bench/README.md's table too. Returns the records file."""
    directory = Path(directory or RECORDS)
    directory.mkdir(parents=True, exist_ok=True)
    entry = {
        "bench": bench, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "commit": _commit(),
        "cpu": _cpu(), "cores": _cores(), "goal": goal, "met": bool(met), "figures": figures,
        "note": note,
    }
    path = directory / f"{bench}.jsonl"
    with path.open("a") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
    if directory == RECORDS and README.exists():
        write_readme()
    print(f"recorded in {path}", file=sys.stderr)
    return path


def _cores() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def latest(directory: Path = RECORDS) -> dict[str, dict]:
    """The newest record of each bench."""
    out = {}
    for path in sorted(Path(directory).glob("*.jsonl")):
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        if lines:
            entry = json.loads(lines[-1])
            out[entry["bench"]] = entry
    return out


def _shown(f: dict) -> str:
    value = f["value"]
    text = f"{value:.3g}" if isinstance(value, float) else str(value)
    text += f" {f['unit']}" if f.get("unit") else ""
    if f.get("ci95"):
        lo, hi = f["ci95"]
        text += f" ({lo:.3g}–{hi:.3g})"
    if f.get("verdict"):
        text += f", {f['verdict']}"
    return f"{f['cell']}: {text}"


def table(directory: Path = RECORDS) -> str:
    """The latest result of each bench as a Markdown table."""
    rows = ["| bench | goal | met | figures | when, where |", "|---|---|---|---|---|"]
    for name, e in sorted(latest(directory).items()):
        figures = "<br>".join(_shown(f) for f in e["figures"]) or "—"
        where = (f"{e['date'][:10]}, {e.get('commit') or '?'}, {e['cpu']} "
                 f"({e.get('cores') or '?'} cores)")
        rows.append(
            f"| `{name}` | {e['goal']} | {'yes' if e['met'] else 'no'} | {figures} | {where} |"
        )
    return "\n".join(rows)


def write_readme(readme: Path = README, directory: Path = RECORDS) -> None:
    text = readme.read_text()
    if BEGIN not in text:
        return
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    readme.write_text(f"{head}{BEGIN}\n{table(directory)}\n{END}{tail}")


if __name__ == "__main__":
    write_readme()
    print(table())
