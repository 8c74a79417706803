"""The parts of a stored result that are records of their own: its CPU profile, its wire
check, the kernel's crypto drivers it ran on, the memory's steadiness before it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


def tuple_of(x: Any) -> tuple:
    """A stored list as a tuple; () for none."""
    return tuple(x) if x else ()


@dataclass(frozen=True)
class ProfileRow:
    """One row of a cell's CPU profile: a (command, shared object, symbol) and its share of
    every sample taken on every CPU during the profiled passes."""

    comm: str = ""
    dso: str = ""
    sym: str = ""
    where: str = ""                         # "kernel" or "user"
    share: float = 0.0
    samples: int = 0

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "ProfileRow":
        return cls(d.get("comm") or "", d.get("dso") or "", d.get("sym") or "",
                   d.get("where") or "", d.get("share") or 0.0, d.get("samples") or 0)


@dataclass(frozen=True)
class Profile:
    """A cell's CPU profile (``runner.core.profile``): its rows, largest first, its call
    stacks folded (``command;outermost;…;leaf`` → samples), and how it was taken."""

    rows: tuple[ProfileRow, ...] = ()
    folded: Mapping[str, int] = field(default_factory=dict)
    samples: int | None = None
    seconds: float | None = None
    windows: int | None = None
    vs_median: float | None = None          # the profiled round's speed against the median
    how: str = ""
    error: str | None = None                # why no profile was taken, where none was

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> "Profile | None":
        if not d:
            return None
        return cls(tuple(ProfileRow.of(x) for x in d.get("rows") or ()), d.get("folded") or {},
                   d.get("samples"), d.get("seconds"), d.get("windows"), d.get("vs_median"),
                   d.get("how") or "", d.get("error"))


@dataclass(frozen=True)
class Wire:
    """What the capture of a network cell's traffic showed (``runner.network.wire``): the
    verdict on what crossed the wire, its packets' sizes, and the canary's own check."""

    verdict: str = "not checked"
    packets: int = 0
    median_packet_bytes: float | None = None
    expected: str | None = None             # plaintext by design, and why
    canary: "Wire | None" = None

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> "Wire | None":
        if not d:
            return None
        return cls(d.get("verdict") or "not checked", d.get("packets") or 0,
                   d.get("median_packet_bytes"), d.get("expected"), cls.of(d.get("canary")))


@dataclass(frozen=True)
class Driver:
    """The kernel's implementation of one crypto algorithm (``host.kernel``'s crypto_drivers)."""

    driver: str = ""
    priority: int | None = None
    implementation: str = ""                # "software", or an instruction set's or a device's

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "Driver":
        return cls(d.get("driver") or "", d.get("priority"), d.get("implementation") or "")


def drivers_of(d: Mapping[str, Any] | None) -> dict[str, Driver]:
    return {name: Driver.of(x) for name, x in (d or {}).items() if x}


@dataclass(frozen=True)
class MemoryNoise:
    """The host's memory bandwidth timed before the first sample (``runner.core.quiet``)."""

    copies: int = 0
    seconds: float = 0.0
    bytes_per_s: float | None = None
    low: float | None = None
    high: float | None = None
    cv: float = 0.0

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> "MemoryNoise | None":
        if not d:
            return None
        return cls(d.get("copies") or 0, d.get("seconds") or 0.0, d.get("bytes_per_s"),
                   d.get("low"), d.get("high"), d.get("cv") or 0.0)
