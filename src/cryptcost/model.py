"""Small immutable records: a sample, a result, a run, the host.

Records turn into plain dicts (``to_dict``) for the store and for ``--json``;
the JSON field names are part of the interface contract.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Hashable

from cryptcost.stats import Comparison, Summary

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class CpuSplit:
    """System-wide CPU seconds, summed over all CPUs, during one sample
    (from /proc/stat deltas), plus what the stack's own daemons used."""

    user: float = 0.0
    nice: float = 0.0
    system: float = 0.0
    idle: float = 0.0
    iowait: float = 0.0
    irq: float = 0.0
    softirq: float = 0.0
    steal: float = 0.0
    daemons: float = 0.0
    max_core_busy: float = 0.0    # the busiest CPU's busy fraction (R2 symptom)

    @property
    def busy(self) -> float:
        """CPU-seconds this machine's CPUs worked: not idle, not waiting for
        I/O, and not stolen by the hypervisor (steal is time the vCPU did
        not run at all, so counting it would bill the stack for a neighbour)."""
        return self.user + self.nice + self.system + self.irq + self.softirq

    @property
    def machine_busy(self) -> float:
        """The share of all CPUs' time they worked (steal left out of both)."""
        total = self.busy + self.idle + self.iowait
        return self.busy / total if total > 0 else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["busy"] = self.busy
        return d


@dataclass(frozen=True)
class Sample:
    """One measurement. ``value`` is the series' primary metric in bytes/s."""

    value: float
    seconds: float
    bytes_moved: int | None = None
    cpu: CpuSplit | None = None
    metrics: dict[str, Any] = field(default_factory=dict)   # iops, lat_p50_us, …

    def to_dict(self) -> dict:
        return {"value": self.value, "seconds": self.seconds, "bytes_moved": self.bytes_moved,
                "cpu": self.cpu.to_dict() if self.cpu else None, "metrics": dict(self.metrics)}

    @classmethod
    def from_dict(cls, d: dict) -> "Sample":
        cpu = d.get("cpu")
        if cpu:
            cpu = CpuSplit(**{k: v for k, v in cpu.items() if k != "busy"})
        return cls(d["value"], d["seconds"], d.get("bytes_moved"), cpu, d.get("metrics") or {})


def metric_median(samples: "list[Sample] | tuple[Sample, ...]", name: str) -> float | None:
    """The median of a per-sample metric over the samples that carry it (None when none does)."""
    import statistics
    values = [s.metrics[name] for s in samples if isinstance(s.metrics.get(name), (int, float))]
    return statistics.median(values) if values else None


@dataclass(frozen=True)
class Result:
    """A series summarised.

    ``kind`` is ``cipher``, ``storage`` or ``network``; ``fields`` identify
    the cell (engine/stack, algorithm, sizes, …) and appear verbatim in the
    JSON; ``metrics`` are derived numbers (iops, cpu_s_per_gib, …);
    ``notes`` are sentences a person should read next to the number.
    """

    kind: str
    fields: dict[str, Any]
    summary: Summary
    stop_reason: str
    samples: tuple[Sample, ...] = ()
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    baseline: "Comparison | None" = None

    @property
    def key(self) -> tuple:
        return (self.kind,) + tuple(sorted((k, str(v)) for k, v in self.fields.items()))

    def to_dict(self) -> dict:
        """The flat JSON form promised by the CLI contract."""
        s = self.summary
        unit = self.metrics.get("unit", "bytes/s")
        per = "bytes" if unit == "bytes/s" else "ops"
        d = {"kind": self.kind, **self.fields,
             f"median_{per}_per_s": s.median, f"mean_{per}_per_s": s.mean,
             "ci95": list(s.ci95), "samples": s.n, "outliers": list(s.outliers),
             "values": [x.value for x in self.samples],
             "stop_reason": self.stop_reason, **self.metrics, "notes": list(self.notes)}
        if self.baseline is not None:
            d["comparison"] = self.baseline.to_dict()
        return d


@dataclass(frozen=True)
class Run:
    """One invocation that produced results."""

    id: int
    started: str
    command: str
    host: dict
    status: str = "running"
    finished: str | None = None
    label: str | None = None
    extra: dict = field(default_factory=dict)     # skipped stacks, suite, cost-model target


@dataclass
class Job:
    """One invocation that measures ``keys`` once per call of ``measure``.

    ``group`` ties jobs that must stay in step (a stack and its baseline):
    they are kept running while any series in the group is unstable, so
    that both sides have the same number of interleaved samples.

    ``warmup`` caps the policy's warm-up rounds for this job (rule 12), for
    a job whose engine warms itself up or that runs right after a warm
    run of the same engine; None keeps the policy's.
    """

    label: str
    keys: tuple[Hashable, ...]
    measure: Callable[[], dict[Hashable, Sample]]
    group: Hashable | None = None
    est_seconds: float = 1.0
    meta: dict[str, Any] = field(default_factory=dict)
    warmup: int | None = None

    def warmups(self, policy_warmup: int) -> int:
        """The rounds of this job that are discarded."""
        return policy_warmup if self.warmup is None else min(self.warmup, policy_warmup)
