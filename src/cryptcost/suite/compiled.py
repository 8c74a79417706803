"""A plan compiled once: the record every step after loading reads.

:func:`compile_plan` turns a loaded plan (:class:`~cryptcost.workloads.plan.RunPlan`, its tables
as written) into one frozen, typed :class:`CompiledPlan`: per part, its cipher plan, its storage
and network plans (one per CPU count) and its sampling policy. A key a table leaves out takes its
field's default, declared once where the field is (``StoragePlan``, ``NetworkPlan``,
``CipherPlan``, ``stats.Policy``); with ``fit``, each storage plan's media are fitted to this
host. The estimate, the ceilings, a budget, ``--until``, ``--resume``, the guest's share and the
runners read this record; :func:`tables_of` writes a part back as tables (the guest's file, ``run
--dry-run --json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from cryptcost import stats
from cryptcost.engines import perf
from cryptcost.links.peer import PeerOptions
from cryptcost.media import parse_medium
from cryptcost.runner import network as netrun
from cryptcost.runner.ciphers import CipherPlan
from cryptcost.runner.network import NetworkPlan
from cryptcost.runner.storage import StoragePlan, fitted_said, validate
from cryptcost.units import parse_size
from cryptcost.workloads import storage as wl
from cryptcost.workloads.plan import Part, RunPlan

# a table's key: the field it sets, from the table's value, and back to the table's
Key = tuple[str, Callable[[Any], Any], Callable[[Any], Any]]


def _same(v: Any) -> Any:
    return v


def _size(key: str) -> Callable[[Any], int]:
    return lambda v: parse_size(str(v), key)


_LIST: Key = ("", tuple, list)
_ACCEL: Key = ("", lambda v: tuple(a == "on" for a in v),
               lambda v: ["on" if a else "off" for a in v])
CIPHER_KEYS: dict[str, Key] = {
    "engines": _LIST, "algorithms": _LIST, "sizes": _LIST, "threads": _LIST, "accel": _ACCEL,
    "seconds": ("", int, _same)}
STORAGE_KEYS: dict[str, Key] = {
    "stacks": _LIST, "medium": ("", parse_medium, lambda m: m.spec), "workloads": _LIST,
    "size": ("", _size("storage.size"), _same), "fit_size": ("", bool, _same),
    "fs": ("", str, _same), "accel": _ACCEL, "profile": ("", bool, _same),
    "sample_minimum": ("", float, _same), "samples": ("", int, _same)}
SIZES_KEYS: dict[str, Key] = {          # the workloads' sizes (wl.Sizes)
    "seq_cap": ("", _size("storage.seq_cap"), _same), "ops_cap": ("", int, _same),
    "small_files": ("", int, _same)}
NETWORK_KEYS: dict[str, Key] = {
    "stacks": _LIST, "link": ("", str, _same), "mtu": ("", int, _same),
    "delay_ms": ("", float, _same), "workloads": _LIST, "streams": ("", int, _same),
    "clients": _LIST, "seconds": ("", int, _same),
    "file_size": ("file_bytes", _size("network.file_size"), _same), "accel": _ACCEL,
    "profile": ("", bool, _same)}
PEER_KEYS: dict[str, Key] = {           # how a peer:HOST link is reached (PeerOptions)
    "ssh_config": ("", str, _same), "peer_sudo": ("sudo", bool, _same),
    "peer_command": ("command", str, _same)}
POLICY_KEYS: dict[str, Key] = {
    "min_samples": ("", int, _same), "max_samples": ("", int, _same),
    "ci_target": ("target", lambda v: v / 100, lambda v: round(v * 100, 6)),
    "warmup": ("", int, _same)}
# the key a table repeats its plans over, one plan per value
PER_CPUS = "cpus"


def _typed(table: dict, keys: dict[str, Key]) -> dict:
    """The fields ``table`` names, typed; those it leaves out (or gives as None) keep their
    defaults."""
    return {(k[0] or key): k[1](table[key]) for key, k in keys.items()
            if table.get(key) is not None}


def _table(obj: Any, keys: dict[str, Key]) -> dict:
    """``obj``'s fields as a table's keys (those that are None left out)."""
    out = {}
    for key, (name, _, back) in keys.items():
        value = getattr(obj, name or key)
        if value is not None:
            out[key] = back(value)
    return out


@dataclass(frozen=True)
class CompiledPart:
    """One part of a compiled plan: its tables as the runners take them, and how it samples."""

    label: str
    policy: stats.Policy = stats.Policy()
    ciphers: CipherPlan | None = None
    storage: tuple[StoragePlan, ...] = ()       # one per CPU count
    network: tuple[NetworkPlan, ...] = ()       # one per CPU count
    keep: tuple[str, ...] = ()                  # what a time budget thins last
    # what the model's estimate of this part is multiplied by for the time it takes here
    scale: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "storage", tuple(self.storage))
        object.__setattr__(self, "network", tuple(self.network))

    def empty(self) -> bool:
        return self.ciphers is None and not self.storage and not self.network


@dataclass(frozen=True)
class CompiledPlan:
    """A plan as every step after loading reads it: its parts, the plan's own policy (the
    cipher ceilings'), the cost model's target, and what this host cannot run (with reasons)."""

    name: str
    parts: tuple[CompiledPart, ...] = ()
    policy: stats.Policy = stats.Policy()
    label: str | None = None
    model: dict = field(default_factory=dict)
    cannot_run: tuple[dict, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(self.parts))
        object.__setattr__(self, "cannot_run", tuple(self.cannot_run))

    def one(self, part: CompiledPart) -> "CompiledPlan":
        """The plan of ``part`` alone."""
        return replace(self, parts=(part,))


def policy_of(*tables: dict) -> stats.Policy:
    """The sampling policy of ``tables`` (the plan's [policy], then a part's own over it); at
    least as many samples at most as at least."""
    kw = _typed({k: v for t in tables for k, v in t.items() if k in POLICY_KEYS}, POLICY_KEYS)
    least = kw.get("min_samples", stats.Policy.min_samples)
    return stats.Policy(**{**kw, "max_samples": max(kw.get("max_samples",
                                                           stats.Policy.max_samples), least)})


def cipher_plan(table: dict) -> CipherPlan:
    return CipherPlan(**_typed(table, CIPHER_KEYS))


def storage_plans(table: dict, part: str | None = None) -> tuple[StoragePlan, ...]:
    """One StoragePlan per CPU count (just one without ``cpus``)."""
    kw = _typed(table, STORAGE_KEYS)
    sizes = wl.Sizes(medium=kw.get("size", StoragePlan.size), **_typed(table, SIZES_KEYS))
    return tuple(StoragePlan(**kw, sizes=sizes, part=part, cpus=cpus)
                 for cpus in table.get(PER_CPUS) or [None])


def network_plans(table: dict, part: str | None = None) -> tuple[NetworkPlan, ...]:
    """One NetworkPlan per CPU count (just one without ``cpus``)."""
    kw = _typed(table, NETWORK_KEYS)
    peer = PeerOptions(**_typed(table, PEER_KEYS))
    return tuple(NetworkPlan(**kw, peer=peer, part=part, cpus=cpus)
                 for cpus in table.get(PER_CPUS) or [None])


def compile_part(part: Part, plan_policy: dict) -> CompiledPart:
    return CompiledPart(
        part.label, policy_of(plan_policy, part.policy),
        ciphers=cipher_plan(part.ciphers) if part.ciphers is not None else None,
        storage=storage_plans(part.storage, part.label) if part.storage is not None else (),
        network=network_plans(part.network, part.label) if part.network is not None else (),
        keep=tuple(part.keep), scale=part.scale)


def compile_plan(plan: RunPlan, fit: bool = False) -> tuple[CompiledPlan, list[str]]:
    """``plan`` compiled, and what a run should be told before it begins. With ``fit`` (this
    host's share, as it will run here): every table validated, what can be refused before
    anything is created or recorded refused, and each storage plan's media fitted to this
    host's room (a table's media made smaller is a note)."""
    compiled = CompiledPlan(plan.name, tuple(compile_part(p, plan.policy) for p in plan.parts),
                            policy_of(plan.policy), plan.label, dict(plan.model),
                            tuple(plan.cannot_run))
    if not fit:
        return compiled, []
    notes: list[str] = []
    parts = []
    for part in compiled.parts:
        if part.ciphers is not None:
            part.ciphers.validate()
        storage = []
        for sp in part.storage:
            sp, _, _ = validate(sp)
            storage.append(replace(sp, sizes=replace(sp.sized(), medium=sp.size)))
            if sp.size_asked and (said := f"{part.label}: storage: {sp.size >> 20} MiB per "
                                  f"stack{fitted_said(sp)}") not in notes:
                notes.append(said)
        for np_ in part.network:
            netrun.validate(np_)
        parts.append(replace(part, storage=tuple(storage)))
    return replace(compiled, parts=tuple(parts)), notes


def tables_of(part: CompiledPart) -> dict[str, dict | None]:
    """``part``'s tables as a plan writes them (every key, defaults too): what
    :func:`compile_part` makes the same part of."""
    out: dict[str, dict | None] = {"ciphers": None, "storage": None, "network": None}
    if part.ciphers is not None:
        out["ciphers"] = _table(part.ciphers, CIPHER_KEYS)
    for kind, plans, keys in (("storage", part.storage, STORAGE_KEYS),
                              ("network", part.network, NETWORK_KEYS)):
        if not plans:
            continue
        first = plans[0]
        table = _table(first, keys)
        if kind == "storage":
            table.update(_table(first.sized(), SIZES_KEYS))
        else:
            table.update(_table(first.peer, PEER_KEYS))
        if first.cpus is not None:
            table[PER_CPUS] = [p.cpus for p in plans]
        out[kind] = table
    return out


def policy_table(policy: stats.Policy) -> dict:
    """A policy as a plan's [policy] writes it."""
    return _table(policy, POLICY_KEYS)


def profiled(plan: RunPlan, profile: bool | None) -> RunPlan:
    """``plan`` with every storage and network table profiled (``--profile``) or not
    (``--no-profile``); without either (None), each table as its own ``profile`` says, and
    where it says nothing, as :func:`cryptcost.engines.perf.by_default` says: profiled when its
    part samples with a warm-up round, whose last run the profile watches at no cost, and not
    in an emulated guest."""
    def want(part: Part, table: dict) -> bool:
        if profile is not None:
            return profile
        return table.get("profile", perf.by_default(policy_of(plan.policy, part.policy).warmup)[0])
    return replace(plan, parts=[replace(part, **{kind: {**table, "profile": want(part, table)}
                                                 for kind in ("storage", "network")
                                                 if (table := getattr(part, kind)) is not None})
                                for part in plan.parts])
