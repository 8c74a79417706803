"""The report's content as frozen, typed records: what :func:`cryptcost.report.document.build`
makes once and every renderer reads (the terminal, Markdown, HTML, JSON and CSV). A row holds
its figures already formatted for people, and what a renderer needs beside them (the
baseline a result is against, its change) as fields of their own, so that no renderer parses
formatted text back. ``to_dict()`` gives the JSON form, the same keys as the fields."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from cryptcost.analysis.answer import Answer


class Record:
    """A record's JSON form: its fields, the same keys."""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Measured(Record):
    """What every storage and network row carries: its stack, figures and verdict."""

    stack: str = ""
    role: str = ""
    workload: str = ""
    median: str = ""
    ci: str = ""
    n: int = 0
    vs: str = "—"                   # "-63.2 % vs plain"
    change: str = "—"               # "-63.2 %", "n.s.", "… untested"
    against: str = ""               # the baseline it is compared with ("" for none)
    bottleneck: str = ""
    explanation: str = ""
    layers: dict[str, float] | None = None          # the busy CPU by layer, from its profile
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class StorageRow(Measured):
    op: str = ""
    block: str = "—"
    qd: int | None = None
    cpus: int | None = None
    iops: str = "—"
    cpu_s_per_gib: str = "—"
    cycles_per_byte: str = "—"
    cache: str = ""


@dataclass(frozen=True)
class NetworkRow(Measured):
    streams: int = 1
    link: str = ""
    gbit: str = "—"
    cpu_a: str = "—"
    cpu_b: str = "—"
    cpu_system: str = "—"
    retransmits: str = "—"
    packet: str = "—"
    wire: str = ""
    negotiated: str = ""


@dataclass(frozen=True)
class CipherRow(Record):
    engine: str
    algorithm: str
    buffer: str
    threads: int
    accel: str
    median: str
    ci: str
    n: int
    warning: str = ""
    note: str = ""


@dataclass(frozen=True)
class SplitRow(Record):
    """The cost split of one stack's cell: reference → twin → stack."""

    stack: str
    op: str
    block: str
    chain: str
    isolates: str
    total: str
    shared: str
    own: str
    note: str
    figures: dict[str, Any]         # the split's own figures, as the JSON export gives them


@dataclass(frozen=True)
class Ranked(Record):
    stack: str
    rank: str                       # "=3" for a rank shared (no significant difference)
    relative: str


@dataclass(frozen=True)
class UnstableGroup(Record):
    cause: str
    cv: str
    count: int
    results: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class NotMeasured(Record):
    what: str
    why: str
    install: str = ""


@dataclass(frozen=True)
class RunInfo(Record):
    id: int
    command: str
    status: str
    started: str
    finished: str | None = None
    suite: str | None = None


@dataclass(frozen=True)
class HostInfo(Record):
    hostname: str
    cpu: str
    cores: int
    flags: str
    kernel: str
    mhz: float | None
    governor: str
    memory_gib: float


@dataclass(frozen=True)
class Document:
    """Everything a report shows."""

    format: str
    version: int
    answer: Answer
    title: str
    run: RunInfo
    host: HostInfo
    recommendations: list
    ranking: tuple[Ranked, ...]
    findings: tuple[str, ...]
    tuning: tuple[str, ...]
    predictions: tuple[dict, ...]
    split: tuple[SplitRow, ...]
    split_intro: str
    target: str | None
    scaling: list
    scaling_rows: tuple[dict, ...]
    storage: tuple[StorageRow, ...]
    ciphers: tuple[CipherRow, ...]
    network: tuple[NetworkRow, ...]
    unstable: tuple[UnstableGroup, ...]
    unstable_intro: str
    field_reports: tuple[dict, ...]
    field_reports_grid: tuple[dict, ...]
    field_reports_intro: str
    not_measured: tuple[NotMeasured, ...]
    environment: tuple[tuple[str, str], ...]
    notes: tuple[str, ...] = ()
    emulated: str | None = None

    def to_dict(self) -> dict:
        from cryptcost.model import as_json
        out = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            out[name] = _plain(value, as_json)
        return out


def _plain(value, as_json):
    """A record's value as JSON's: records by their ``to_dict()``, sequences as lists."""
    if isinstance(value, (list, tuple)):
        return [_plain(v, as_json) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v, as_json) for k, v in value.items()}
    if hasattr(value, "to_dict") or hasattr(value, "__dataclass_fields__"):
        return as_json(value)
    return value
