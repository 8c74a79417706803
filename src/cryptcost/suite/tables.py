"""A plan's tables as the runners take them: its repetition policy, its cipher table, and one
storage or network plan per CPU count."""

from __future__ import annotations

from dataclasses import replace

from cryptcost import stats
from cryptcost.engines import CIPHER_ENGINES, perf
from cryptcost.links.peer import PeerOptions
from cryptcost.media import parse_medium
from cryptcost.runner.ciphers import CipherPlan
from cryptcost.runner.network import NetworkPlan
from cryptcost.runner import network as netrun
from cryptcost.runner.storage import StoragePlan, fitted_said, validate
from cryptcost.units import parse_size
from cryptcost.workloads import network as netwl
from cryptcost.workloads import storage as wl
from cryptcost.workloads.plan import DEFAULT_POLICY, Part, RunPlan


def policy_of(plan: RunPlan) -> stats.Policy:
    p = {**DEFAULT_POLICY, **plan.policy}
    return stats.Policy(p["min_samples"], max(p["max_samples"], p["min_samples"]),
                        p["ci_target"] / 100,
                        p["warmup"], deadline=p.get("deadline"))


def part_plan(plan: RunPlan, part: Part) -> RunPlan:
    """The plan of one part alone, sampled with the part's own policy over the plan's."""
    return replace(plan, parts=[part], policy={**plan.policy, **part.policy})


def cipher_plan(c: dict) -> CipherPlan:
    return CipherPlan(engines=tuple(c.get("engines", CIPHER_ENGINES)),
                      algorithms=tuple(c["algorithms"]) if c.get("algorithms") else None,
                      sizes=tuple(c.get("sizes", [4096])), threads=tuple(c.get("threads", [1])),
                      accel=tuple(a == "on" for a in c.get("accel", ["on"])),
                      seconds=c.get("seconds", 1))


def storage_plans(s: dict, part: str | None = None) -> list[StoragePlan]:
    """One StoragePlan per CPU count (just one without ``cpus``)."""
    size = parse_size(str(s.get("size", "512M")), "storage.size")
    sizes = wl.Sizes(medium=size,
                     seq_cap=parse_size(str(s.get("seq_cap", "256M")), "storage.seq_cap"),
                     small_files=s.get("small_files", 2000), ops_cap=s.get("ops_cap", 32768))
    medium = parse_medium(s.get("medium", "ram"))
    return [StoragePlan(stacks=list(s.get("stacks", ["all"])), medium=medium,
                        workloads=list(s.get("workloads", ["quick"])), size=size,
                        fit_size=s.get("fit_size", False),
                        fs=s.get("fs", "ext4"),
                        sizes=sizes, cpus=cpus, part=part,
                        accel=tuple(a == "on" for a in s.get("accel", ["on"])),
                        profile=s.get("profile", False))
            for cpus in (s.get("cpus") or [None])]


def network_plans(n: dict, part: str | None = None) -> list[NetworkPlan]:
    """One NetworkPlan per CPU count (just one without ``cpus``)."""
    return [NetworkPlan(stacks=list(n.get("stacks", ["all"])), link=n.get("link", "netns"),
                        mtu=n.get("mtu", 1500), delay_ms=float(n.get("delay_ms", 0)),
                        workloads=list(n.get("workloads", ["quick"])), streams=n.get("streams", 4),
                        clients=tuple(n.get("clients", netwl.CLIENTS)),
                        seconds=n.get("seconds", 2),
                        file_bytes=parse_size(str(n.get("file_size", "256M")),
                                               "network.file_size"),
                        accel=tuple(a == "on" for a in n.get("accel", ["on"])), part=part,
                        cpus=cpus,
                        profile=n.get("profile", False),
                        peer=PeerOptions(ssh_config=n.get("ssh_config"),
                                         sudo=n.get("peer_sudo", False),
                                         command=n.get("peer_command", "cryptcost")))
            for cpus in (n.get("cpus") or [None])]


def validate_plan(plan: RunPlan) -> list[str]:
    """Refuse what can be refused before anything is created or recorded; what a run should be
    told before it begins (a storage table's media made smaller to fit) is returned."""
    notes = []
    for part in plan.parts:
        if part.ciphers is not None:
            cipher_plan(part.ciphers).validate()
        if part.storage:
            for sp in storage_plans(part.storage):
                validate(sp)
                if sp.size_asked and (said := f"{part.label}: storage: {sp.size >> 20} MiB per "
                                      f"stack{fitted_said(sp)}") not in notes:
                    notes.append(said)
        for np_ in network_plans(part.network) if part.network else []:
            netrun.validate(np_)
    return notes


def profiled(plan: RunPlan, profile: bool | None) -> RunPlan:
    """``plan`` with every storage and network table profiled (``--profile``) or not
    (``--no-profile``); without either (None), each table as its own ``profile`` says, and
    where it says nothing, as :func:`cryptcost.engines.perf.by_default` says: profiled when its
    part samples with a warm-up round, whose last run the profile watches at no cost, and not
    in an emulated guest."""
    def want(part: Part, table: dict) -> bool:
        if profile is not None:
            return profile
        return table.get("profile", perf.by_default(policy_of(part_plan(plan, part)).warmup)[0])
    return replace(plan, parts=[replace(part, **{kind: {**table, "profile": want(part, table)}
                                                 for kind in ("storage", "network")
                                                 if (table := getattr(part, kind))})
                                for part in plan.parts])
