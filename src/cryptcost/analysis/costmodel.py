"""The cost model: what a stack would do on a device or link the user names.

On the RAM medium a stack reaches S and its baseline B; the stack adds
``1/S − 1/B`` seconds per byte. On a device (or link) of speed D:

* **pipelined** (crypto overlaps I/O, as with queued or parallel requests):
  ``min(D, S)`` — whichever ceiling is lower binds;
* **serial** (crypto and I/O take turns, as with one request in flight):
  ``1 / (1/D + 1/S − 1/B)``.

The prediction is the range between the two, with the binding ceiling
named. :func:`check` holds it against measurement: the same stacks measured
on a device of the target speed (the ``throttled:RATE`` medium, or a real
one), each within 20 % of its predicted range or not;
``bench/costmodel_vs_throttled`` runs both sides and prints the check.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptcost.analysis.bottleneck import Verdict
from cryptcost.record import Stored
from cryptcost.model import Cell
from cryptcost.units import rate


@dataclass(frozen=True)
class Prediction:
    """A stack's throughput on the target, from its cell measured on the RAM medium."""

    cell: Cell
    measured: float
    low: float
    high: float
    binding: str
    sentence: str

    def to_dict(self) -> dict:
        c = self.cell
        return {"stack": c.stack, "workload": c.workload, "op": c.op, "block_bytes": c.block_bytes,
                "iodepth": c.iodepth, "measured": self.measured, "predicted_low": self.low,
                "predicted_high": self.high, "binding": self.binding, "sentence": self.sentence}


def on(s: float, b: float | None, d: float) -> tuple[float, float]:
    """The range for a stack of speed ``s`` (its baseline's ``b``; None: none) on a device or
    link of speed ``d``: serial (crypto and I/O take turns) to pipelined (they overlap)."""
    extra = max(0.0, 1 / s - 1 / (b or s))
    pipelined = min(d, s)
    return min(1 / (1 / d + extra), pipelined), pipelined


def predict(results: list[Stored], target: float, target_label: str,
            verdicts: dict[int, Verdict] | None = None) -> list[Prediction]:
    """One prediction per measured (non-baseline) byte-throughput result."""
    by_key = {r.paired(): r for r in results}
    out = []
    for i, r in enumerate(results):
        if r.facts.is_baseline or r.bytes_per_s is None or not r.baseline:
            continue
        base = by_key.get(r.paired(stack=r.baseline))
        s = r.bytes_per_s
        low, pipelined = on(s, base.bytes_per_s if base else None, target)
        if target <= s:
            binding = target_label
        else:
            v = (verdicts or {}).get(i)
            kind = v.bottleneck if v else "stack"
            binding = f"the stack ({kind})"
        out.append(Prediction(r.paired(), s, low, pipelined, binding,
                              f"on {target_label}: {rate(low)}–{rate(pipelined)}, {binding} "
                              "binds"))
    return out


TOLERANCE = 0.20          # a prediction holds when the measurement is within 20 % of its range


def holds(predictions: list[Prediction], measured: list[Stored]) -> list[dict]:
    """Each prediction beside the same stack and cell measured on a device of
    the target's speed: ``error`` is 0 inside the predicted range, else the
    relative distance to its nearer end; ``holds`` when within TOLERANCE."""
    by_cell = {r.paired(medium=None): r for r in measured if r.bytes_per_s}
    out = []
    for p in predictions:
        m = by_cell.get(p.cell.but(medium=None))       # the same cell, on the device
        if not m:
            continue
        v, lo, hi = m.bytes_per_s, p.low, p.high
        error = 0.0 if lo <= v <= hi else (v - hi) / hi if v > hi else (v - lo) / lo
        c = p.cell
        out.append({"stack": c.stack, "workload": c.workload, "op": c.op,
                    "block_bytes": c.block_bytes, "iodepth": c.iodepth, "binding": p.binding,
                    "predicted_low": lo, "predicted_high": hi, "measured_on_device": v,
                    "measured_ci95": list(m.ci95) if m.ci95 else None, "error": error,
                    "holds": abs(error) <= TOLERANCE})
    return out
