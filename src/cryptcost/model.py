"""Small immutable records: a cell, a sample, a result, a run.

:class:`Cell` is the one identity of a measurement. Records turn into plain
dicts (``to_dict``) for the store and for ``--json``; the JSON field names
are part of the interface contract, and :meth:`Cell.of` reads a cell back
from them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from typing import Any, Callable, Hashable, Mapping

from cryptcost.stats import Comparison, Summary
from cryptcost.units import size as _size

KINDS = ("cipher", "storage", "network")
_FLOWS = ("storage", "network")          # the kinds whose cells name a stack and a workload


def _of(*kinds: str) -> dict:
    """A cell field that only these kinds carry (another kind's JSON may hold a key of the same
    name that says how it was measured, e.g. a storage result's engine, fio)."""
    return {"default": None, "metadata": {"kinds": kinds}}


@dataclass(frozen=True, kw_only=True)
class Cell:
    """What one series measured, and where: the identity a result is stored
    under, paired with its baselines on, grouped with its peers on and
    compared across runs on. There is no other definition: a use that lets
    a dimension vary says which, with :meth:`but` (``cell.but(stack=base)``
    is the same cell of a baseline; ``but(cpus=None)`` groups CPU counts).

    ``None`` is "not a dimension of this cell" (a cipher has no medium). The
    field order is the order cells sort in. ``host`` and ``peer`` name the
    machine that measured and the one at the link's other end, where the
    run reaches beyond this host.
    """

    kind: str | None = None                                # cipher, storage, network
    stack: str | None = field(**_of(*_FLOWS))              # stack[:variant][/accel-off]
    workload: str | None = field(**_of(*_FLOWS))
    op: str | None = field(**_of(*_FLOWS))
    block_bytes: int | None = field(**_of("storage"))
    iodepth: int | None = field(**_of("storage"))
    cpus: int | None = None                                # pinned CPUs (None: all)
    part: str | None = None                                # the suite's part that planned it
    medium: str | None = field(**_of("storage"))
    fs: str | None = field(**_of("storage"))
    # storage: the file; network: a copied file
    size: int | None = field(**_of(*_FLOWS))
    link: str | None = field(**_of("network"))
    mtu: int | None = field(**_of("network"))
    delay_ms: float | None = field(**_of("network"))    # added to each round trip (netem)
    streams: int | None = field(**_of("network"))
    engine: str | None = field(**_of("cipher"))
    algorithm: str | None = field(**_of("cipher"))
    buffer_bytes: int | None = field(**_of("cipher"))
    threads: int | None = field(**_of("cipher"))
    accel: bool | None = None
    host: str | None = None
    peer: str | None = None

    @classmethod
    def cipher(cls, engine: str, algorithm: str, buffer_bytes: int, threads: int,
               accel: bool) -> "Cell":
        return cls(kind="cipher", engine=engine, algorithm=algorithm, buffer_bytes=buffer_bytes,
                   threads=threads, accel=accel)

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "Cell":
        """The cell of a result as stored or exported (a flat dict); keys that are no
        dimension of its kind are left out."""
        kind = d.get("kind")
        return cls(**{f.name: d.get(f.name) for f in fields(cls)
                      if kind in f.metadata.get("kinds", (kind,))})

    def fields(self) -> dict[str, Any]:
        """The dimensions as its result's JSON carries them (``kind`` apart): each of its
        kind's own, and those every kind may have (CPUs, part, acceleration, hosts) where set."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "kind" and
                (self.kind in f.metadata.get("kinds", ()) or getattr(self, f.name) is not None)}

    def but(self, **changes: Any) -> "Cell":
        """The same cell with these dimensions changed (None: left out)."""
        return replace(self, **changes)

    def sort_key(self) -> tuple:
        """For sorting cells whose dimensions may be None."""
        return tuple((0, v) if v is not None
                     else (1, 0) for v in (getattr(self, f.name) for f in fields(self)))

    def label(self) -> str:
        """The cell in a line: ``luks:aes-xts-plain64 seq write 1 MiB``, ``openssl aes-256-gcm
        4 KiB ×2 threads, acceleration off``."""
        if self.kind == "cipher":
            what = f"{self.engine} {self.algorithm} {_size(self.buffer_bytes)}"
            what += f" ×{self.threads} threads" if (self.threads or 1) > 1 else ""
        else:
            what = f"{self.stack} {self.title()}"
            what += f" at queue depth {self.iodepth}" if (self.iodepth or 1) > 1 else ""
        what += f" on {self.cpus} CPU{'s' if self.cpus > 1 else ''}" if self.cpus else ""
        what += f" via {self.peer}" if self.peer else ""
        what += f" on {self.host}" if self.host else ""
        return what + (", acceleration off" if self.accel is False and self.kind == "cipher"
                       else "")

    def title(self) -> str:
        """What was measured, in words: ``seq write 1 MiB``, ``send ×4``."""
        what = (f"{self.workload} {self.op}" if self.op and self.op != self.workload
                else str(self.workload))
        if self.block_bytes:
            what += f" {_size(self.block_bytes)}"
        if (self.streams or 1) > 1:
            what += f" ×{self.streams}"
        return what

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
    """One value of a series (see :mod:`cryptcost.vocabulary`: for storage, one or more
    passes). ``value`` is the series' primary metric in bytes/s."""

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

    ``cell`` is what was measured; ``attrs`` describe it without being part
    of its identity (the stack's ``params`` and facts, a network stack's
    ``variant``); ``metrics`` are derived numbers (iops, cpu_s_per_gib, …);
    ``notes`` are sentences a person should read next to the number.
    """

    cell: Cell
    summary: Summary
    stop_reason: str
    attrs: dict[str, Any] = field(default_factory=dict)
    samples: tuple[Sample, ...] = ()
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    baseline: "Comparison | None" = None

    @property
    def kind(self) -> str:
        return self.cell.kind or "?"

    def to_dict(self) -> dict:
        """The flat JSON form promised by the CLI contract."""
        s = self.summary
        unit = self.metrics.get("unit", "bytes/s")
        per = "bytes" if unit == "bytes/s" else "ops"
        d = {"kind": self.kind, **self.cell.fields(), **self.attrs,
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


def as_json(obj: Any) -> Any:
    """``json.dumps``'s ``default`` at every JSON boundary (``--json``, export): a typed record
    as its JSON form — its ``to_dict()``, else its fields — and anything else as text."""
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    return str(obj)
