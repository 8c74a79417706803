"""A stored result, typed: what the analysis and the reports read.

The store, ``--json``, export and import speak JSON (:meth:`model.Result.to_dict`
writes it); :meth:`Stored.of` reads one such dict back once, at that boundary,
into attributes. Everything above it — bottlenecks, rankings, the cost model,
the scaling curves, the report — reads those attributes, so a field renamed or
missing fails in one place. A record is no mapping: a result read by a string
key above this boundary fails at once, rather than reading ``None``. A result's
profile, wire check and drivers are records of their own (:mod:`.parts`), and so
are a run's host and what it did not measure (:mod:`.run`).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping, Sequence

from cryptcost.model import Cell, Sample
from cryptcost.record.parts import (Driver, MemoryNoise, Profile, ProfileRow, Wire,  # noqa: F401
                                    drivers_of, tuple_of)
from cryptcost.record.run import Emulated, Host, HostCpu, Skipped  # noqa: F401


@dataclass(frozen=True)
class Versus:
    """A result against one of its baselines: the overhead (1 − ratio of medians), its
    95 % interval, and whether the difference is significant."""

    overhead: float | None = None
    overhead_ci95: tuple[float, float] | None = None
    significant: bool | None = None
    verdict: str = ""

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> "Versus":
        d = d or {}
        ci = d.get("overhead_ci95")
        return cls(d.get("overhead"), tuple(ci) if ci else None, d.get("significant"),
                   d.get("verdict") or "")


@dataclass(frozen=True)
class CipherRef:
    """The raw cipher a stack runs, for its cipher ceiling (``stacks.base.Stack.cipher_ref``):
    ``algorithm`` as the cipher engines name it, ``where`` it runs (kernel, go or userspace),
    ``unit`` (bytes encrypted at once), ``exact`` (False: the nearest algorithm measured),
    ``then`` (a MAC run over the same bytes after it, or None)."""

    algorithm: str
    where: str
    unit: int
    exact: bool = True
    threads: Mapping[str, Any] = field(default_factory=dict)   # by op: (threads, from what size)
    then: str | None = None

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> "CipherRef | None":
        if not d:
            return None
        return cls(d["algorithm"], d["where"], d["unit"], d.get("exact", True),
                   d.get("threads") or {}, d.get("then"))


@dataclass(frozen=True)
class CpuUse:
    """The CPU a series used, the mean over its samples: CPU-seconds per sample by state,
    the stack's daemons, and the busiest core's and the whole machine's busy shares."""

    user: float = 0.0
    system: float = 0.0
    iowait: float = 0.0
    softirq: float = 0.0
    irq: float = 0.0
    daemons: float = 0.0
    max_core_busy: float = 0.0
    machine_busy: float = 0.0

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> "CpuUse":
        d = d or {}
        return cls(**{f.name: d.get(f.name) or 0.0 for f in fields(cls)})

    @classmethod
    def mean(cls, samples: Sequence[Sample]) -> "CpuUse":
        """The mean of the samples' CPU splits (``model.CpuSplit``), by the fields above."""
        splits = [x.cpu for x in samples if x.cpu]
        return cls(**{f.name: statistics.fmean(getattr(c, f.name) for c in splits)
                      if splits else 0.0 for f in fields(cls)})

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Facts:
    """What a stack declared of itself (``stacks.base.Stack.facts``), as stored with each result:
    the analysis reads these, never a table of stack names."""

    layer: str | None = None
    role: str | None = None                 # "baseline" for a plaintext reference or a twin
    crypto_library: str | None = None
    use_case: str | None = None
    baselines: tuple[str, ...] = ()         # its references, the first its twin where it has two
    security: tuple[str, ...] = ()
    isolates: str | None = None             # what a twin adds to its reference
    advice: str | None = None
    tools: tuple[str, ...] = ()             # the programs it runs (their names)
    features: tuple[str, ...] = ()
    reads_like: str | None = None           # a spec whose reads take the same path (a control)

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> "Facts":
        d = d or {}
        return cls(d.get("layer"), d.get("role"), d.get("crypto_library"), d.get("use_case"),
                   tuple_of(d.get("baselines")), tuple_of(d.get("security")), d.get("isolates"),
                   d.get("advice"), tuple_of(d.get("tools")), tuple_of(d.get("features")),
                   d.get("reads_like"))

    @property
    def is_baseline(self) -> bool:
        """A plaintext reference, whether the run added it or the user asked for it."""
        return self.role == "baseline"


@dataclass(frozen=True)
class Stored:
    """One result of any kind, as read back from the store or an export."""

    cell: Cell
    median: float | None = None             # bytes/s (ops/s where ``per`` says so)
    per: str = "bytes"                      # what ``median`` counts per second: bytes or ops
    ci95: tuple[float, float] | None = None
    values: tuple[float, ...] = ()
    n: int = 0                              # samples kept
    facts: Facts = Facts()
    cipher_ref: CipherRef | None = None
    baseline: str | None = None             # the first baseline's label
    overhead: float | None = None           # against ``baseline``
    overhead_ci95: tuple[float, float] | None = None
    overhead_significant: bool | None = None
    vs: Mapping[str, Versus] = field(default_factory=dict)
    cpu: CpuUse = CpuUse()
    cpu_s_per_gib: float | None = None      # storage and ciphers: CPU-seconds per GiB moved
    cpu_s_per_gb: Mapping[str, float] = field(default_factory=dict)  # network: per GB, at each end
    busiest_daemon_core: float | None = None   # network: its busiest process's share of a core
    shared_cpus: bool = False               # network: both ends ran on this host's CPUs
    emulated_peer: str | None = None        # network: why end b's speeds are not real hardware's
    iops: float | None = None
    role: str = "measured"                  # or "baseline"
    cache_mode: str | None = None           # storage: direct, or buffered with fsync
    retransmits: float | None = None        # network: TCP retransmits per sample
    unstable: bool = False
    cv: float | None = None
    likely_cause: str | None = None
    incomplete: str | None = None           # why the series stopped early, where it did
    accel_verified: bool | None = None
    accel_speedup: float | None = None      # an acceleration-off copy: how much faster with it on
    warning: str | None = None
    profile: Profile | None = None
    wire: Wire | None = None
    host_drift: Any = None
    yardstick: float | None = None      # median bytes/s of the fixed SHA-256 before its samples
    notes: tuple[str, ...] = ()
    # from the stack's parameters: what the analysis and the reports read of them
    kernel_drivers: Mapping[str, Driver] = field(default_factory=dict)   # read after set-up
    memory_noise: MemoryNoise | None = None
    weakness: str | None = None             # a weakness the variant declares (never ranked)
    negotiated: Mapping[str, Any] = field(default_factory=dict)   # what the ends agreed on

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "Stored":
        per = "ops" if d.get("median_bytes_per_s") is None and "median_ops_per_s" in d else "bytes"
        params = d.get("params") or {}
        ci = d.get("ci95")
        oci = d.get("overhead_ci95")
        return cls(
            cell=Cell.of(d), median=d.get(f"median_{per}_per_s"), per=per,
            ci95=tuple(ci) if ci else None, values=tuple_of(d.get("values")),
            n=d.get("samples") or 0,
            facts=Facts.of(params.get("facts")), cipher_ref=CipherRef.of(params.get("cipher_ref")),
            baseline=d.get("baseline"),
            overhead=d.get("overhead"), overhead_ci95=tuple(oci) if oci else None,
            overhead_significant=d.get("overhead_significant"),
            vs={k: Versus.of(v) for k, v in (d.get("vs") or {}).items()},
            cpu=CpuUse.of(d.get("cpu")), cpu_s_per_gib=d.get("cpu_s_per_gib"),
            cpu_s_per_gb=d.get("cpu_s_per_gb") or {}, iops=d.get("iops"),
            role=d.get("role") or "measured", cache_mode=d.get("cache_mode"),
            retransmits=d.get("retransmits"),
            busiest_daemon_core=d.get("busiest_daemon_core"),
            shared_cpus=bool(d.get("shared_cpus")), emulated_peer=d.get("emulated_peer"),
            unstable=bool(d.get("unstable")), cv=d.get("cv"), likely_cause=d.get("likely_cause"),
            incomplete=d.get("incomplete"), accel_verified=d.get("accel_verified"),
            accel_speedup=d.get("accel_speedup"),
            warning=d.get("warning"), profile=Profile.of(d.get("profile")),
            wire=Wire.of(d.get("wire")),
            host_drift=d.get("host_drift"), yardstick=d.get("yardstick"),
            notes=tuple_of(d.get("notes")),
            kernel_drivers=drivers_of(params.get("kernel_drivers")),
            memory_noise=MemoryNoise.of(params.get("memory_noise")),
            weakness=params.get("warning"), negotiated=params.get("negotiated") or {})

    @property
    def kind(self) -> str | None:
        return self.cell.kind

    @property
    def stack(self) -> str | None:
        return self.cell.stack

    @property
    def bytes_per_s(self) -> float | None:
        """The median in bytes/s, None for a result counted in operations."""
        return self.median if self.per == "bytes" else None

    def paired(self, **changes: Any) -> Cell:
        """The cell this result is paired on; with ``changes``, the same cell of another stack
        (a baseline), op or block size. Acceleration is left out: an acceleration-off copy's
        label says so (``/accel-off``), and it is paired with baselines that run with it on."""
        return self.cell.but(accel=None, **changes)


def read(results: list[Mapping[str, Any]]) -> list[Stored]:
    """Stored results, typed, in their order."""
    return [r if isinstance(r, Stored) else Stored.of(r) for r in results]
