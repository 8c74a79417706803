"""The guest's share of a plan: what this host's kernel cannot run and Debian's stock kernel
can, in ``cryptcost vm``'s guest (``cryptcost run --vm``).

:func:`share` cuts a plan, as loaded, to the stacks (and the kernel's cipher engine) that are
unavailable here for a kernel feature the stock kernel has, one plan per guest kernel they
need; :func:`to_json` and :func:`from_json` carry such a plan to the guest, whose ``run
--parts`` measures it whole (its kernel has what this one lacks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from cryptcost.engines import CIPHER_ENGINES
from cryptcost.errors import Unavailable, UserError
from cryptcost.host import kernel
from cryptcost.stacks import of_kind, parse_spec, unavailable_reason
from cryptcost.stacks.fs import MIN_MEDIUM
from cryptcost.units import parse_size
from cryptcost.runner.storage import StoragePlan
from cryptcost.suite.compiled import CompiledPlan, policy_of, policy_table, tables_of
from cryptcost.workloads.plan import Part, RunPlan, validate

# what a guest run's plan is called in the store: the suite's name and this, with the kernel
# where it is not the stock one (each share is calibrated on its own earlier runs)
GUEST_SUFFIX = " (guest)"

# Under TCG the guest's CPU is software: its speeds say what works and roughly how stacks relate,
# never what hardware does, and they cost many times the host's time. Its share runs on media of
# at most this size, and each series on the plan's minimum number of samples.
GUEST_MAX_SIZE = 256 << 20


@dataclass(frozen=True)
class GuestShare:
    """What one guest boot measures: ``kernel`` as ``cryptcost vm --kernel`` takes it (``""``:
    the stock kernel), and the plan of just that (as :func:`share` cuts it from the loaded plan,
    then compiled)."""

    kernel: str
    plan: CompiledPlan | RunPlan

    @property
    def kernel_said(self) -> str:
        return f"Linux {self.kernel}" if self.kernel else "Debian's stock kernel"


def _emulable(exc: Unavailable | None) -> str | None:
    """The guest kernel a stack unavailable for ``exc`` needs; None when it is available here or
    the guest cannot help (a program missing is missing there too: it runs this root)."""
    return exc.guest if exc is not None else None


def _fits(cls, kind: str, table: dict) -> bool:
    """Whether ``all`` takes ``cls`` for this table (a storage stack on its filesystem)."""
    return kind != "storage" or table.get("fs", StoragePlan.fs) in cls.filesystems


def _specs(table: dict, kind: str) -> dict[str, list[str]]:
    """The table's stack specs by the guest kernel they need (``all`` as the names it stands
    for); a delayed network table where the kernel has no netem goes whole."""
    by_kernel: dict[str, list[str]] = {}
    if kind == "network" and table.get("delay_ms") and not kernel.features()["netem"]["present"]:
        for spec in table.get("stacks", ["all"]):
            cls = parse_spec(spec, kind)[0][0] if spec != "all" else None
            need = _emulable(unavailable_reason(cls)) if cls else None
            by_kernel.setdefault(need or "", []).append(spec)
        return by_kernel
    for spec in table.get("stacks", ["all"]):
        if spec == "all":
            for name, cls in of_kind(kind).items():
                need = _emulable(unavailable_reason(cls))
                if need is not None and _fits(cls, kind, table):
                    by_kernel.setdefault(need, []).append(name)
            continue
        pairs = parse_spec(spec, kind)
        need = _emulable(unavailable_reason(pairs[0][0]))
        if need is not None:
            by_kernel.setdefault(need, []).append(spec)
            continue
        for cls, variant in pairs:               # a variant only the guest's kernel runs
            need = _emulable(cls.variant_unavailable(variant))
            if need is not None:
                by_kernel.setdefault(need, []).append(f"{cls.name}:{variant}")
    return by_kernel


def _kernel_ciphers(table: dict) -> dict | None:
    """A cipher table's kernel engine, where this kernel has no AF_ALG to run it through."""
    if "kernel" not in table.get("engines", CIPHER_ENGINES):
        return None
    try:
        CIPHER_ENGINES["kernel"]().require()
    except Unavailable as exc:
        if exc.guest is not None:                # AF_ALG: the stock kernel has it
            return {**table, "engines": ["kernel"]}
    return None


def share(plan: RunPlan) -> list[GuestShare]:
    """The guest's share of ``plan`` (as loaded, before it is cut to this host), one per guest
    kernel, in the order of the plan's parts; nothing when this host runs it all."""
    parts: dict[str, list[Part]] = {}
    for part in plan.parts:
        tables: dict[str, dict[str, dict]] = {}
        for kind in ("storage", "network"):
            table = getattr(part, kind)
            for need, specs in (_specs(table, kind) if table is not None else {}).items():
                # the guest has no perf worth its cost under TCG: verdicts from the ceilings
                cut = {**table, "stacks": specs, "profile": False}
                tables.setdefault(need, {})[kind] = _smaller(cut) if kind == "storage" else cut
        ciphers = _kernel_ciphers(part.ciphers) if part.ciphers is not None else None
        if ciphers:
            tables.setdefault("", {})["ciphers"] = ciphers
        for need, kinds in tables.items():
            parts.setdefault(need, []).append(Part(part.label, **kinds, keep=part.keep))
    least = policy_of(plan.policy).min_samples
    policy = {**plan.policy, "min_samples": least, "max_samples": least}
    return [GuestShare(need, replace(plan, name=plan.name + (
        GUEST_SUFFIX.replace(")", f", Linux {need})") if need else GUEST_SUFFIX), parts=got,
                                     cannot_run=[], policy=policy))
            for need, got in sorted(parts.items())]


def _smaller(table: dict) -> dict:
    """A storage table on media of at most :data:`GUEST_MAX_SIZE`, and at least what its
    filesystem is made on (XFS: :data:`~cryptcost.stacks.fs.MIN_MEDIUM`), sampled as the share's
    policy says (its minimum): a table's own number of samples (``storage.samples``) and the
    shorter sample it is paired with are a trade made for this host's passes at memory speed,
    where a guest's pass under TCG lasts a sample or more."""
    if table.get("samples") is not None:
        table = {k: v for k, v in table.items() if k not in ("samples", "sample_minimum")}
    size = parse_size(str(table.get("size", StoragePlan.size)), "storage.size")
    least = MIN_MEDIUM.get(table.get("fs", StoragePlan.fs), 0)
    return {**table, "size": f"{max(min(size, GUEST_MAX_SIZE), least) >> 20}M"} if size else table


def to_json(plan: CompiledPlan) -> str:
    """A compiled share as the guest's ``run --parts`` reads it: each part's tables and policy
    written whole (:func:`~cryptcost.suite.compiled.tables_of`)."""
    return json.dumps({"name": plan.name, "label": plan.label,
                       "policy": policy_table(plan.policy), "model": plan.model,
                       "cannot_run": list(plan.cannot_run),
                       "parts": [{"label": p.label, **tables_of(p), "keep": list(p.keep),
                                  "scale": p.scale, "policy": policy_table(p.policy)}
                                 for p in plan.parts]}, indent=1)


def from_json(text: str, where: str) -> RunPlan:
    """A plan :func:`to_json` wrote, each part checked as a plan file's tables are."""
    try:
        data = json.loads(text)
        parts = data["parts"]
        name = str(data["name"])
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{where}: not a plan's parts as cryptcost run --vm writes them "
                        f"({exc})") from None
    out = []
    for i, p in enumerate(parts):
        tables = {k: p.get(k) for k in ("ciphers", "storage", "network") if p.get(k) is not None}
        keep = p.get("keep") or []
        own = p.get("policy") or {}
        validate({**tables, "policy": {**(data.get("policy") or {}), **own},
                  "model": data.get("model") or {},
                  **({"run": {"keep": keep}} if keep else {})}, f"{where}: part {i + 1}")
        scale = p.get("scale")
        if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                                  or scale <= 0):
            raise UserError(f"{where}: part {i + 1}: scale must be a positive number, "
                            f"not {scale!r}")
        out.append(Part(str(p.get("label") or name), **tables, keep=tuple(keep),
                        scale=float(scale) if scale is not None else None, policy=dict(own)))
    if not out:
        raise UserError(f"{where}: no parts to run")
    cannot = data.get("cannot_run") or []
    if not isinstance(cannot, list) or not all(isinstance(c, dict) and "reason" in c
                                               for c in cannot):
        raise UserError(f"{where}: cannot_run must be a list of what was left out, each with "
                        "its reason")
    return RunPlan(name=name, label=data.get("label"), parts=out,
                   policy=data.get("policy") or {}, model=data.get("model") or {},
                   cannot_run=cannot)
