"""The regression gate's verdict in the formats CI systems read, one pure function each:
Markdown (a job summary), JUnit XML (a test report: one case per shared cell, a failure per
regression), Bencher Metric Format JSON (this run's figures, for a tracker), and cryptcost's own
JSON."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.table import Table

from cryptcost import units
from cryptcost.errors import UserError
from cryptcost.report.export import dumps
from cryptcost.report.gate import CellVerdict, Gate, Judged, host_said

FORMATS = ("table", "md", "junit", "bencher", "json")
MARK = {"regression": "**regression**", "host": "the host's move", "improvement": "improvement",
        "within threshold": "within threshold", "no significant difference": "no significant "
        "difference", "untested": "untested (one sample a side)"}


def figure(value: float, unit: str) -> str:
    if unit == "bytes/s":
        return units.rate(value)
    if unit == "ops/s":
        return f"{value:,.0f} op/s"
    return f"{value:.3g} {unit}"


def change(j: Judged) -> str:
    lo, hi = j.ci95
    return f"{j.change * 100:+.1f} % ({(lo - 1) * 100:+.1f} … {(hi - 1) * 100:+.1f} %)"


def headline(gate: Gate) -> str:
    """The verdict in a line: passed or failed, how many regressions, against what."""
    n = len(gate.regressions)
    verdict = (f"FAILED: {n} regression{'s' if n != 1 else ''}" if n else "passed")
    return (f"cryptcost check {verdict} against baseline {gate.baseline} (run {gate.run_a}), "
            f"run {gate.run_b}: {len(gate.cells)} shared cells, threshold "
            f"{gate.threshold.said()}{', strict' if gate.strict else ''}")


def counts(gate: Gate) -> str:
    order = ("regression", "host", "improvement", "within threshold",
             "no significant difference", "untested")
    return ", ".join(f"{gate.count(s)} {s}" for s in order if gate.count(s))


def why(cell: CellVerdict, gate: Gate) -> str:
    """What failed (or what the host explains) in a cell, in a sentence."""
    bad = [j for j in cell.figures if j.status in ("regression", "host")]
    said = "; ".join(f"{j.figure} {figure(j.a, j.unit)} → {figure(j.b, j.unit)}, {change(j)}"
                     for j in bad)
    if cell.status == "host":
        said += (": the host's own move between the runs could make this alone"
                 + (" (--strict fails it)" if gate.strict else ""))
    if cell.differences:
        said += "; differs: " + "; ".join(cell.differences)
    return said


def to_markdown(gate: Gate) -> str:
    out = [f"## {headline(gate)}", "", f"{counts(gate)}; {host_said(gate)}.", ""]
    if gate.regressions:
        out += ["### Regressions", ""]
        out += [f"- **{c.label}**: {why(c, gate)}" for c in gate.regressions] + [""]
    out += ["| cell | figure | baseline | this run | change (95 % interval) | verdict |",
            "|---|---|---|---|---|---|"]
    for c in gate.cells:
        for j in c.figures:
            out.append(f"| {c.label} | {j.figure} | {figure(j.a, j.unit)} | "
                       f"{figure(j.b, j.unit)} | {change(j)} | {MARK[j.status]} |")
    if gate.environment:
        out += ["", "### What differs between the environments", ""]
        out += [f"- {d['what']}: {d['a']} → {d['b']}" for d in gate.environment]
    return "\n".join(out) + "\n"


def to_junit(gate: Gate) -> str:
    """One test suite, a test case per shared cell (classname: its kind), a ``failure`` per
    regression; a change the host explains is a passing case that says so."""
    failing = gate.regressions
    suite = ET.Element("testsuite", name=f"cryptcost check against {gate.baseline}",
                       tests=str(len(gate.cells)), failures=str(len(failing)), errors="0",
                       skipped="0")
    props = ET.SubElement(suite, "properties")
    for name, value in (("baseline", gate.baseline), ("baseline_run", gate.run_a),
                        ("run", gate.run_b), ("threshold", gate.threshold.said()),
                        ("host_move", host_said(gate))):
        ET.SubElement(props, "property", name=name, value=str(value))
    for c in gate.cells:
        case = ET.SubElement(suite, "testcase", classname=f"cryptcost.{c.kind}", name=c.label)
        if c in failing:
            text = why(c, gate)
            ET.SubElement(case, "failure", message=text, type=c.status).text = text
        else:
            ET.SubElement(case, "system-out").text = "; ".join(
                f"{j.figure}: {change(j)}, {j.status}" for j in c.figures)
    root = ET.Element("testsuites", name="cryptcost", tests=str(len(gate.cells)),
                      failures=str(len(failing)))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def measure(j: Judged) -> str:
    """A figure's Bencher measure slug: ``throughput``, ``cpu-seconds-per-gib`` (or ``-gb``)."""
    if j.figure == "throughput":
        return "throughput"
    return "cpu-seconds-per-" + j.unit.rsplit("/", 1)[-1].lower()


def to_bencher(gate: Gate) -> str:
    """This run's figures as Bencher Metric Format: each shared cell a benchmark, a measure per
    figure (``throughput`` in bytes/s with its 95 % interval; ``cpu-seconds-per-gib``)."""
    data: dict = {}
    for c in gate.cells:
        entry = data.setdefault(c.label, {})
        for j in c.figures:
            metric = {"value": j.b}
            if j.b_ci95:
                metric.update(lower_value=j.b_ci95[0], upper_value=j.b_ci95[1])
            entry[measure(j)] = metric
    return dumps(data)


def to_json(gate: Gate) -> str:
    return dumps(gate.to_dict())


def show(verdict: Gate, out, fmt: str = "table", target: str | None = None) -> int:
    """Print a verdict on the console ``out`` in ``fmt`` (a table, else that format on stdout),
    and with ``--gate-output`` (``target``) write it there too; its exit status."""
    if target:
        try:
            Path(target).write_text(render(verdict, "md" if fmt == "table" else fmt))
        except OSError as exc:
            raise UserError(f"cannot write {target}: {exc.strerror}") from None
    if fmt == "table" or target:
        print_table(verdict, out)
    else:
        sys.stdout.write(render(verdict, fmt))
    return verdict.exit_code


def render(verdict: Gate, fmt: str) -> str:
    """The verdict in ``fmt``: md, junit, bencher or json."""
    if fmt == "md":
        return to_markdown(verdict)
    if fmt == "junit":
        return to_junit(verdict)
    if fmt == "bencher":
        return to_bencher(verdict)
    return to_json(verdict)


def print_table(verdict: Gate, out) -> None:
    t = Table(title=f"Run {verdict.run_b} against baseline {verdict.baseline} "
                    f"(run {verdict.run_a})", title_justify="left")
    for col in ("cell", "figure", "baseline", "this run", "change (95 % interval)", "verdict"):
        t.add_column(col)
    for c in verdict.cells:
        for j in c.figures:
            t.add_row(c.label, j.figure, figure(j.a, j.unit), figure(j.b, j.unit),
                      change(j), MARK[j.status].replace("**", ""))
    out.print(t)
    out.print(f"{counts(verdict)}; {host_said(verdict)}")
    for c in verdict.regressions:
        out.print(f"regression: {c.label}: {why(c, verdict)}")
    for c in verdict.cells:
        if c.status == "host" and not verdict.strict:
            out.print(f"not failed, the host's move: {c.label}: {why(c, verdict)}")
    out.print(headline(verdict))
