"""The regression gate: a run against a named baseline, cell by cell, with an exit status.

Each cell both runs measured (whole, in both) is judged on its throughput and, where both
runs' samples count it, on its CPU per byte:

- **regression**: significantly slower (or significantly more CPU per byte) by more than the
  threshold of its kind; it fails the gate;
- **host**: such a change that the host's own move between the runs could make alone: the
  same direction, and no larger than the largest move of the host's own measures — its CPU
  (the OpenSSL cells both runs hold, unless OpenSSL's version changed between them; and the
  cell's own yardstick, the SHA-256 timed before its samples), and for a storage cell its
  memory bandwidth (the storage plans' memory timing); it fails the gate only under
  ``strict``;
- **improvement**, **within threshold** (significant, smaller than the threshold), **no
  significant difference**: listed, never failed.

Where the two environments differ (the CPU, a flag, the kernel, a kernel driver, a tool's
version, a stack's parameters), each difference that bears on a cell is named beside it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from cryptcost import stats
from cryptcost.errors import UserError
from cryptcost.model import Cell
from cryptcost.record import Stored, read
from cryptcost.report.compare import STILL, environment_diff, host_move, key

KINDS = ("cipher", "storage", "network")
DEFAULT_THRESHOLD = 0.05
# a stack's parameters that are measurements of the run, not its configuration
MEASURED_PARAMS = {"facts", "integrity", "memory_noise", "memory_warmed", "link", "cipher_ref",
                   "kernel_drivers", "negotiated", "versions"}
# per-sample CPU per byte, by kind: the metric the runners store with each sample, its unit
CPU_METRIC = {"storage": "cpu_s_per_gib", "network": "cpu_s_per_gb_system"}
CPU_UNIT = {"storage": "CPU-s/GiB", "network": "CPU-s/GB"}
FAILING = ("regression",)


@dataclass(frozen=True)
class Threshold:
    """How large a significant slowdown must be to fail the gate: one fraction for every kind,
    or one per kind (``5%,storage=10%``)."""

    default: float = DEFAULT_THRESHOLD
    per_kind: tuple[tuple[str, float], ...] = ()

    def of(self, kind: str) -> float:
        return dict(self.per_kind).get(kind, self.default)

    def said(self) -> str:
        return ", ".join([f"{self.default:.0%}"] + [f"{k} {v:.0%}" for k, v in self.per_kind])


def parse_threshold(text: str) -> Threshold:
    """``5%`` or ``5%,storage=10%,network=8%`` (a bare number is a percentage)."""
    default, per = DEFAULT_THRESHOLD, []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        kind, _, value = item.rpartition("=")
        if kind and kind not in KINDS:
            raise UserError(f"bad --threshold {text!r}: {kind!r} is no kind; use "
                            f"{', '.join(KINDS)}")
        try:
            fraction = float(value.strip().removesuffix("%")) / 100
        except ValueError:
            raise UserError(f"bad --threshold {text!r}: use a percentage such as 5% or "
                            "5%,storage=10%") from None
        if not 0 <= fraction < 1:
            raise UserError(f"bad --threshold {text!r}: each must be 0 … 99 %")
        if kind:
            per.append((kind, fraction))
        else:
            default = fraction
    return Threshold(default, tuple(per))


@dataclass(frozen=True)
class Judged:
    """One figure of one shared cell (its throughput, or its CPU per byte) judged."""

    figure: str                   # "throughput" or "CPU per byte"
    a: float
    b: float
    unit: str
    ratio: float                  # B/A
    ci95: tuple[float, float]
    significant: bool | None
    status: str                   # regression, host, improvement, within threshold, no …
    b_ci95: tuple[float, float] | None = None      # this run's own interval, where stored

    @property
    def change(self) -> float:
        return self.ratio - 1

    def to_dict(self) -> dict:
        return {"figure": self.figure, "a": self.a, "b": self.b, "unit": self.unit,
                "ratio": self.ratio, "change": self.change, "ratio_ci95": list(self.ci95),
                "significant": self.significant, "status": self.status,
                "b_ci95": list(self.b_ci95) if self.b_ci95 else None}


@dataclass(frozen=True)
class CellVerdict:
    cell: Cell
    kind: str
    figures: tuple[Judged, ...]
    differences: tuple[str, ...] = ()      # what differs between the environments, for it

    @property
    def label(self) -> str:
        return label(self.cell)

    @property
    def status(self) -> str:
        """The cell's worst: regression, then host, then improvement, then the rest."""
        order = ("regression", "host", "improvement", "within threshold",
                 "no significant difference", "untested")
        return min((f.status for f in self.figures), key=order.index)

    def to_dict(self) -> dict:
        return {"cell": self.label, "kind": self.kind, "status": self.status,
                "figures": [f.to_dict() for f in self.figures],
                "differences": list(self.differences)}


@dataclass
class Gate:
    """The verdict of a run against a baseline."""

    baseline: str
    run_a: int
    run_b: int
    threshold: Threshold
    strict: bool
    cells: list[CellVerdict] = field(default_factory=list)
    cpu_move: dict | None = None
    memory_move: dict | None = None
    environment: list[dict] = field(default_factory=list)

    @property
    def regressions(self) -> list[CellVerdict]:
        failing = FAILING + (("host",) if self.strict else ())
        return [c for c in self.cells if c.status in failing]

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions else 0

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.cells)

    def to_dict(self) -> dict:
        return {"baseline": self.baseline, "a": self.run_a, "b": self.run_b,
                "threshold": {"default": self.threshold.default,
                              **dict(self.threshold.per_kind)},
                "strict": self.strict, "passed": not self.regressions,
                "regressions": [c.label for c in self.regressions],
                "host_move": {"cpu": self.cpu_move, "memory": self.memory_move},
                "environment": self.environment, "cells": [c.to_dict() for c in self.cells]}


def label(cell: Cell) -> str:
    """A shared cell in a line, unique within a run: its label, and where it was measured
    when not the default (a medium other than RAM, a filesystem other than ext4, a link other
    than two namespaces, a delay, a size)."""
    where = [v for v, default in ((cell.medium, "ram"), (cell.fs, "ext4"),
                                  (cell.link, "netns")) if v and v != default]
    if cell.delay_ms:
        where.append(f"+{cell.delay_ms:g} ms")
    if cell.mtu and cell.mtu != 1500:
        where.append(f"MTU {cell.mtu}")
    if cell.size and cell.kind == "storage":
        where.append(f"{cell.size >> 20} MiB")
    return cell.label() + (f" [{', '.join(where)}]" if where else "")


def cpu_move(a: list[Stored], b: list[Stored], host_a: dict, host_b: dict) -> dict | None:
    """The host's CPU move from its OpenSSL cells (:func:`host_move`), unless OpenSSL itself
    changed between the runs: then its cells measure the package too, not the host alone."""
    tools_a, tools_b = host_a.get("tools") or {}, host_b.get("tools") or {}
    if tools_a.get("openssl") != tools_b.get("openssl"):
        return None
    return host_move(a, b)


def explained(ratio: float, move: dict | None) -> bool:
    """Whether a B/A ``ratio`` lies between 1 and the farthest the host's ``move`` went in its
    direction (its ``low`` … ``high`` range where it has one): what the host alone could make."""
    if not move:
        return False
    low = min(move.get("low", move["ratio"]), move["ratio"])
    high = max(move.get("high", move["ratio"]), move["ratio"])
    if ratio < 1:
        return low < 1 - STILL and ratio >= low
    return high > 1 + STILL and ratio <= high


def _inverse(move: dict) -> dict:
    """A move of speed as a move of CPU per byte: slower is costlier."""
    return {"ratio": 1 / move["ratio"], "low": 1 / move.get("high", move["ratio"]),
            "high": 1 / move.get("low", move["ratio"])}


def memory_move(a: list[Stored], b: list[Stored]) -> dict | None:
    """How far the host's memory bandwidth moved from run A to run B: the median of each run's
    timings (one per storage plan, carried by its storage results), B/A; None where either run
    timed none."""
    def median(rs):
        seen = {r.memory_noise.bytes_per_s for r in rs
                if r.kind == "storage" and r.memory_noise and r.memory_noise.bytes_per_s}
        return statistics.median(seen) if seen else None
    ma, mb = median(a), median(b)
    if not ma or not mb:
        return None
    return {"ratio": mb / ma, "a": ma, "b": mb}


def cpu_values(samples: list[dict]) -> dict[Cell, list[float]]:
    """Each series' per-sample CPU per byte, keyed as :func:`key` keys results."""
    out: dict[Cell, list[float]] = {}
    for s in samples:
        metric = CPU_METRIC.get(s.get("kind"))
        value = (s.get("metrics") or {}).get(metric) if metric else None
        if value:
            out.setdefault(key_of_series(s), []).append(float(value))
    return out


def key_of_series(sample: dict) -> Cell:
    return Cell.of(sample["series"]).but(part=None)


def judge(results_a: list[dict], results_b: list[dict], host_a: dict, host_b: dict, *,
          baseline: str, run_ids: tuple[int, int], threshold: Threshold = Threshold(),
          strict: bool = False, samples_a: list[dict] = (),
          samples_b: list[dict] = ()) -> Gate:
    """Run B against baseline run A, cell by cell (see the module's docstring)."""
    a, b = read(results_a), read(results_b)
    params_a = {key(r): raw.get("params") or {} for r, raw in zip(a, results_a)}
    gate = Gate(baseline, run_ids[0], run_ids[1], threshold, strict,
                cpu_move=cpu_move(a, b, host_a, host_b), memory_move=memory_move(a, b),
                environment=environment_diff(host_a, host_b))
    cpu_a, cpu_b = cpu_values(list(samples_a)), cpu_values(list(samples_b))
    by_a = {key(r): r for r in a if not r.incomplete}
    for rb, raw_b in zip(b, results_b):
        ra = by_a.get(key(rb))
        if (not ra or rb.incomplete or ra.per != rb.per or ra.median is None
                or rb.median is None):
            continue
        limit = threshold.of(rb.kind)
        own = {"ratio": rb.yardstick / ra.yardstick} if ra.yardstick and rb.yardstick else None
        moves = [m for m in (gate.cpu_move, own,
                             gate.memory_move if rb.kind == "storage" else None) if m]
        figures = [_judge("throughput", list(ra.values or [ra.median]),
                          list(rb.values or [rb.median]), f"{rb.per}/s", limit, moves,
                          slower=lambda r: r < 1, b_ci95=rb.ci95)]
        ka, kb = cpu_a.get(key(rb)), cpu_b.get(key(rb))
        if ka and kb:
            figures.append(_judge("CPU per byte", ka, kb, CPU_UNIT[rb.kind], limit,
                                  [_inverse(m) for m in moves],
                                  slower=lambda r: r > 1))
        gate.cells.append(CellVerdict(key(rb), rb.kind, tuple(figures), _differences(
            rb, params_a[key(rb)], raw_b.get("params") or {}, gate.environment)))
    if not gate.cells:
        raise UserError(f"run {run_ids[1]} and baseline {baseline} (run {run_ids[0]}) share no "
                        "whole cell: measure the baseline's plan again, or name another baseline")
    return gate


def _judge(figure: str, va: list[float], vb: list[float], unit: str, limit: float,
           moves: list[dict], slower, b_ci95: tuple[float, float] | None = None) -> Judged:
    """One figure B against A: its status from the significance, the threshold and the host's
    moves (``slower``: whether a ratio is the worse direction)."""
    cmp = stats.compare(va, vb)
    a_med, b_med = statistics.median(va), statistics.median(vb)
    if cmp.significant is None:
        status = "untested"
    elif not cmp.significant:
        status = "no significant difference"
    elif not slower(cmp.ratio):
        status = "improvement"
    elif abs(cmp.ratio - 1) <= limit:
        status = "within threshold"
    elif any(explained(cmp.ratio, m) for m in moves):
        status = "host"
    else:
        status = "regression"
    return Judged(figure, a_med, b_med, unit, cmp.ratio, tuple(cmp.ratio_ci95),
                  cmp.significant, status, b_ci95)


def _differences(b: Stored, pa: dict, pb: dict, environment: list[dict]) -> tuple[str, ...]:
    """What differs between the two environments that bears on this cell: the host's CPU,
    flags, kernel and drivers always; a tool's version where the cell's stack or engine uses
    it; a stack's own parameters."""
    tools = set(b.facts.tools or {}) | ({b.cell.engine} if b.cell.engine else set())
    out = []
    for d in environment:
        what = d["what"]
        if what.startswith("tool ") and what[5:] not in tools:
            continue
        if what == "hostname":
            continue
        out.append(f"{what}: {d['a']} → {d['b']}")
    for name in sorted(set(pa.get("versions") or {}) | set(pb.get("versions") or {})):
        va, vb = (pa.get("versions") or {}).get(name), (pb.get("versions") or {}).get(name)
        if va != vb and f"tool {name}: {va} → {vb}" not in out:
            out.append(f"{name} {va} → {vb}")
    for name in sorted((set(pa) | set(pb)) - MEASURED_PARAMS):
        if pa.get(name) != pb.get(name):
            out.append(f"{b.cell.stack} {name}: {pa.get(name)} → {pb.get(name)}")
    return tuple(out)


def host_said(gate: Gate) -> str:
    """How far the host moved between the runs, in a line."""
    cpu = gate.cpu_move
    if cpu:
        said = (f"CPU {(cpu['ratio'] - 1) * 100:+.1f} % ({(cpu['low'] - 1) * 100:+.1f} … "
                f"{(cpu['high'] - 1) * 100:+.1f} % over {cpu['cells']} OpenSSL cells)")
    elif any(d["what"] == "tool openssl" for d in gate.environment):
        said = "CPU unknown (OpenSSL's version changed, so its cells measure it too)"
    else:
        said = "CPU unknown (fewer than 3 OpenSSL cells in both runs)"
    mem = gate.memory_move
    said += (f", memory bandwidth {(mem['ratio'] - 1) * 100:+.1f} %" if mem else
             ", memory bandwidth unknown")
    return "the host between the runs: " + said
