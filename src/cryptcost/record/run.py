"""What a run holds besides its results, typed: the host it ran on (the probe's JSON, read
once) and what it did not measure, with why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from cryptcost.record.parts import Driver, drivers_of, tuple_of


@dataclass(frozen=True)
class Skipped:
    """What a run did not measure, and why (``runner.core.pairing``, the cipher table, a
    suite's part): a stack or engine with what the recommendation needs of it."""

    stack: str | None = None
    engine: str | None = None
    algorithm: str | None = None
    part: str | None = None
    kind: str | None = None
    use_case: str | None = None
    advice: str | None = None
    accel: Any = None                       # why acceleration could not be switched off
    reason: str = ""
    install: str | None = None

    @classmethod
    def of(cls, d: "Mapping[str, Any] | Skipped") -> "Skipped":
        if isinstance(d, Skipped):
            return d
        return cls(d.get("stack"), d.get("engine"), d.get("algorithm"), d.get("part"),
                   d.get("kind"), d.get("use_case"), d.get("advice"), d.get("accel"),
                   d.get("reason") or "", d.get("install"))

    @property
    def what(self) -> str:
        """Its part, stack, engine and algorithm, as far as it has them."""
        return " ".join(str(x) for x in (self.part, self.stack, self.engine, self.algorithm) if x)


@dataclass(frozen=True)
class Emulated:
    """How ``cryptcost vm``'s guest is emulated: why its speeds are not real hardware's."""

    why: str = "measured in a virtual machine"
    kernel: str = "?"
    cpus: int | str = "?"

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> "Emulated | None":
        if not d:
            return None
        return cls(d.get("why") or cls.why, d.get("kernel") or "?", d.get("cpus") or "?")


@dataclass(frozen=True)
class HostCpu:
    """The host's CPU as probed: what a ceiling scales by and a comparison of hosts names."""

    model: str | None = None
    cores: int | None = None
    cores_usable: int | None = None         # the CPUs a run may use here
    mhz: float | None = None
    governor: str | None = None
    flags: Mapping[str, bool] = field(default_factory=dict)     # aes, avx2, … → present

    @property
    def usable(self) -> int:
        """The CPUs this host let a run use."""
        return self.cores_usable or self.cores or 1


@dataclass(frozen=True)
class Host:
    """A run's host as probed (``host.probe``), typed; the run stores the probe's JSON."""

    hostname: str | None = None
    cpu: HostCpu = HostCpu()
    kernel: str | None = None               # its release
    memory_total: int | None = None
    crypto_drivers: Mapping[str, Driver] = field(default_factory=dict)
    tools: Mapping[str, str] = field(default_factory=dict)
    features: Mapping[str, bool] = field(default_factory=dict)      # kernel feature → present
    emulated: Emulated | None = None        # cryptcost vm's guest
    notes: tuple[str, ...] = ()
    cryptcost: str | None = None
    python: str | None = None

    @classmethod
    def of(cls, d: "Mapping[str, Any] | Host | None") -> "Host":
        if isinstance(d, Host):
            return d
        d = d or {}
        c = d.get("cpu") or {}
        return cls(d.get("hostname"),
                   HostCpu(c.get("model"), c.get("cores"), c.get("cores_usable"), c.get("mhz"),
                           c.get("governor"), c.get("flags") or {}),
                   (d.get("kernel") or {}).get("release"), (d.get("memory") or {}).get("total"),
                   drivers_of(d.get("crypto_drivers")), d.get("tools") or {},
                   {k: bool((v or {}).get("present"))
                    for k, v in (d.get("features") or {}).items()},
                   Emulated.of(d.get("emulated")), tuple_of(d.get("notes")),
                   d.get("cryptcost"), d.get("python"))
