"""Network measurement: stacks × workloads on one link, each stack against
its matched baseline (plain TCP, or the same file share unencrypted),
interleaved.

Flow: :func:`validate` refuses bad input before anything exists;
:func:`run_network` builds the link (two namespaces joined by veth, or
loopback), starts iperf3's server at end ``b``, builds every stack on the
link, sends the wire check's canary through it and reads back what it
negotiated, then turns each workload into one job per instance (all
instances of one workload in one group, rotated each round: rule 2), and
summarises each series with its overhead against the baselines.
Everything is released by the ``Resources`` scope, in reverse order.
"""

from __future__ import annotations

import logging
import os
import platform
import statistics
from dataclasses import dataclass, field

from cryptcost import proc, stats
from cryptcost.engines import dbench, iperf3, perf
from cryptcost.errors import CryptcostError, Unavailable, UserError
from cryptcost.host import cpu, kernel
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link, parse_link
from cryptcost.links.peer import PeerOptions
from cryptcost.model import Cell, Result, metric_median as median
from cryptcost.record import CpuUse
from cryptcost.runner.core import flow, pairing, pinning
from cryptcost.runner.network.steps import FileSource, NetInstance, NetRunner
from cryptcost.runner.core.scheduler import Progress, Series, drift_cause
from cryptcost.runner.core.sink import Sink
from cryptcost.stacks.base import FEATURE_HINTS
from cryptcost.stacks.net import NetworkStack
from cryptcost.workloads import network as wl

log = logging.getLogger("cryptcost.network")


@dataclass(frozen=True)
class NetworkPlan:
    """One network comparison, as a plan's table or ``cryptcost network`` asks it; each field's
    default is the table's (``[network]`` with nothing in it)."""

    stacks: tuple[str, ...] = ("all",)   # specs: name, name:variant, name:*, or "all"
    link: str = "netns"
    mtu: int = 1500
    delay_ms: float = 0.0                # added to every round trip on the link (netem)
    workloads: tuple[str, ...] = ("quick",)
    streams: int = 4                     # for the "streams" workload
    clients: tuple[int, ...] = wl.CLIENTS  # for the "dbench" workload, one cell each
    seconds: float = 2                   # per stream sample
    file_bytes: int = 256 << 20          # per large-file copy
    small_files: int = 512
    # (True, False): each measured stack also with acceleration off
    accel: tuple[bool, ...] = (True,)
    part: str | None = None
    cpus: int | None = None              # both ends' programs and daemons pinned to this many CPUs
    # a profiled round after the samples: where each cell's CPU goes (perf)
    profile: bool = False
    peer: PeerOptions = field(default_factory=PeerOptions)     # how ``peer:HOST`` is reached

    @property
    def link_kind(self) -> str:
        """``netns``, ``loopback`` or ``peer`` (the part of ``link`` before any ``:HOST``)."""
        return self.link.partition(":")[0]


@dataclass
class NetworkOutcome(flow.Outcome):
    pass


def link_fits(cls, link: str) -> str | None:
    """Why stack class ``cls`` cannot be built on ``link`` (``peer:HOST``, ``netns`` …), or None."""
    kind = link.partition(":")[0]
    return (None if kind in cls.links
            else f"runs only on a {' or '.join(cls.links)} link, not --link {kind}")


def resolve(specs: list[str], link: str, accel: tuple[bool, ...] = (True,), here: bool = True
            ) -> tuple[list[tuple[NetworkStack, str]], list[dict]]:
    """Instances to build: the stacks asked for, their baselines, and with
    ``accel`` (True, False) a copy of each measured stack with hardware
    acceleration off — or, where its library cannot be switched, a skip
    that says so (never an unverified "off"). ``here=False``: see :func:`pairing.resolve`."""
    def make(cls, variant: str) -> NetworkStack:
        return cls(variant)
    resolved, skipped = pairing.resolve(specs, "network", make,
                                        fits=lambda cls: link_fits(cls, link), here=here)
    pairing.add_accel_off_copies(resolved, skipped, make, accel)
    return resolved, skipped


def validate(plan: NetworkPlan) -> tuple[list[tuple[NetworkStack, str]], list[dict]]:
    """Everything that can be refused before anything is created or recorded."""
    parse_link(plan.link, plan.mtu, plan.peer, plan.delay_ms)
    if plan.delay_ms and not kernel.features()["netem"]["present"]:
        raise UserError(f"--delay needs the kernel's netem queueing discipline (sch_netem), and "
                        f"this kernel ({platform.release()}) has none: run it in Debian's stock "
                        f"kernel with 'cryptcost vm -- network --delay {plan.delay_ms:g} …', or "
                        f"on {FEATURE_HINTS['netem'][1]}")
    if "dbench" in wl.expand(plan.workloads) and not dbench.available():
        raise UserError("the dbench workload needs dbench and its load file: cryptcost install "
                        "dbench")
    if not plan.clients or any(not 1 <= c <= 64 for c in plan.clients):
        raise UserError(f"bad dbench clients {','.join(map(str, plan.clients))} (--clients, "
                        "or a plan's network.clients): each 1 … 64")
    if not 1 <= plan.streams <= 128:
        raise UserError(f"bad --streams {plan.streams}: use 1 … 128")
    if not 1 <= plan.seconds <= 600 or plan.seconds != int(plan.seconds):
        raise UserError(f"bad --seconds {plan.seconds:g}: use whole seconds, 1 … 600 "
                        "(iperf3 times whole seconds)")
    if not plan.accel or set(plan.accel) - {True, False}:
        raise UserError("bad --accel: use on, off or on,off")
    cpu.validate_cpu_count(plan.cpus)
    if plan.profile:
        perf.require()
    resolved, skipped = resolve(plan.stacks, plan.link,
                                (True,) + tuple(a for a in plan.accel if not a))
    for stack, _ in resolved:
        if plan.link_kind not in stack.links:
            raise UserError(f"stack {stack.name} runs only on a {' or '.join(stack.links)} link, "
                            f"not --link {plan.link}")
    if not any(role == "measured" for _, role in resolved):
        raise UserError("no network stack to measure: "
                        + "; ".join(s["reason"] for s in skipped[:3]))
    if os.geteuid() != 0:
        raise UserError("network stacks need root (namespaces, tunnels, daemons): run with sudo")
    return resolved, skipped


def describe_plan(plan: NetworkPlan, resolved, skipped) -> list[str]:
    measured = [s.label for s, role in resolved if role == "measured"]
    baselines = [s.label for s, role in resolved if role == "baseline"]
    lines = [f"network stacks: {', '.join(measured)}"
             + (f"  (baselines: {', '.join(baselines)})" if baselines else ""),
             f"workloads: {', '.join(wl.expand(plan.workloads))}; link: {plan.link}, MTU "
             f"{plan.mtu}" + (f", {plan.delay_ms:g} ms added to each round trip (netem)"
                              if plan.delay_ms else "")
             + f"; {plan.seconds:g} s per stream sample, each repeated until stable"]
    if plan.link_kind == "peer":
        lines.append(f"end a is this host, end b {plan.link.partition(':')[2]} (reached with "
                     "ssh; cryptcost worker holds end b and releases it)")
    if plan.link == "netns":
        lines.append("both ends of the link share this machine's CPUs: read CPU-s/GB per end, not "
                     "Gbit/s, as what carries over to real hosts")
    for s in skipped:
        lines.append(f"not measured: {s['stack']}: {s['reason']}"
                     + (f" (install: {s['install']})" if s.get("install") else ""))
    return lines


def run_network(plan: NetworkPlan, policy: stats.Policy, *, res: Resources,
                sink: Sink | None = None,
                progress: Progress | None = None) -> NetworkOutcome:
    """Set up, verify, measure, compare. Teardown happens when ``res`` is released.
    With ``plan.cpus`` everything it starts runs on that many CPUs (:mod:`runner.core.pinning`)."""
    with pinning.pinned(res, plan.cpus) as affinity:
        return _run_network(plan, policy, affinity, res=res, sink=sink, progress=progress)


def _run_network(plan: NetworkPlan, policy: stats.Policy, affinity: str | None, *, res: Resources,
                 sink: Sink | None, progress: Progress | None) -> NetworkOutcome:
    resolved, skipped = validate(plan)
    workdir = res.tmpdir("cryptcost-net-")
    link_for = _Links(plan, res)

    names = wl.expand(plan.workloads)
    files = None
    if any(s.traffic == "files" for s, _ in resolved) and wl.ops(names, "files"):
        files = FileSource(res, plan.file_bytes, plan.small_files, wl.SMALL_FILE)
    runner = NetRunner(res, workdir, plan.seconds, files)
    out = NetworkOutcome(skipped=skipped)
    if any(not s.exclusive for s, _ in resolved):
        link_for(False)             # a link that cannot be made (a peer unreachable) ends the run
    ready: list[NetInstance] = []
    for stack, role in resolved:
        inst = NetInstance(stack, stack.label, role)
        try:
            inst.link, inst.service = link_for(stack.exclusive)
            why = inst.link.unavailable(stack.name)
            if why:
                raise Unavailable(why)
            stack.link = inst.link
            inst.endpoint = stack.setup(res, inst.link, inst.service)
            if files is not None or stack.traffic == "stream":
                inst.canary = runner.canary(inst)
            stack.verify(res)
            ready.append(inst)
        except flow.SETUP_ERRORS as exc:
            # the daemon's death is the cause
            exc = CryptcostError(stack.dead()) if stack.dead() else exc
            flow.setup_failed(out, inst, exc, "network", log)
    ops = {i.label: wl.ops(names, i.stack.traffic, streams=plan.streams, file_bytes=plan.file_bytes,
                           small_files=plan.small_files, clients=plan.clients) for i in ready}
    for i in ready:
        if any(op.workload == "dbench" for op in ops[i.label]) and not i.stack.mountpoint():
            ops[i.label] = [op for op in ops[i.label] if op.workload != "dbench"]
            out.skipped.append({"stack": i.label, "workload": "dbench", "kind": "network",
                                "reason": "dbench runs in a directory: this stack's client "
                                          "copies files with a program and mounts nothing"})
    flow.compare([(i, op) for op in _ordered(ops) for i in ready if op in ops[i.label]],
                 _Network(runner, plan, affinity, policy.target), outcome=out, policy=policy,
                 res=res, sink=sink, progress=progress, profile=plan.profile)
    return out


class _Network(flow.Kind):
    """A network comparison as the flow reads it: a step is one op (a stream or a file-share
    workload), run by the step runner across each instance's link."""

    kind = "network"

    def __init__(self, runner: NetRunner, plan: NetworkPlan, affinity: str | None,
                 target: float):
        self.runner, self.plan, self.affinity, self.target = runner, plan, affinity, target

    def ops(self, step: wl.NetOp) -> tuple[wl.NetOp]:
        return (step,)

    def cell(self, inst: NetInstance, op: wl.NetOp) -> Cell:
        return _cell(inst, op, self.plan)

    def result(self, inst: NetInstance, op: wl.NetOp, series: Series, every: dict) -> Result:
        return _result(inst, op, series, every, self.plan, self.affinity, self.target)

    def job(self, step: wl.NetOp) -> flow.StepJob:
        return flow.StepJob(step.workload, ("network", step.key), self.plan.seconds + 1)


class _Links:
    """The links a run's stacks are set up on: one shared by every stack, made once; a link of
    its own for a stack that needs the namespaces to itself. Each has iperf3's server on end b."""

    def __init__(self, plan: NetworkPlan, res: Resources):
        self.plan, self.res, self.made = plan, res, 0
        self.shared: tuple[Link, int] | None = None

    def __call__(self, exclusive: bool) -> tuple[Link, int]:
        if not exclusive and self.shared:
            return self.shared
        plan = self.plan
        link = parse_link(plan.link, plan.mtu, plan.peer, plan.delay_ms)
        link.setup(self.res)
        service = link.port(iperf3.PORT)
        b = link.at("b")
        server = b.daemon(iperf3.server_argv(link.server_bind, service),
                          logfile=str(b.tmpdir("cryptcost-net-")
                                      / f"iperf3-server-{service}-{self.made}.log"))
        self.made += 1
        proc.wait_for(lambda: link.listening("b", service), timeout=20, daemon=server,
                      what="iperf3 server listening")
        if not exclusive:
            self.shared = link, service
        return link, service


def _ordered(ops: dict[str, list[wl.NetOp]]) -> list[wl.NetOp]:
    seen: list[wl.NetOp] = []
    for lst in ops.values():
        seen += [op for op in lst if op not in seen]
    return seen




def _cell(inst: NetInstance, op: wl.NetOp, plan: NetworkPlan) -> Cell:
    return Cell(kind="network", stack=inst.label, accel=inst.stack.accel, link=inst.link.name,
                peer=getattr(inst.link, "host", None), mtu=inst.link.mtu,
                delay_ms=inst.link.delay_ms or None, workload=op.workload,
                op=op.op, streams=op.streams,
                size=op.file_bytes,
                part=plan.part or None, cpus=plan.cpus or None)


def _attrs(inst: NetInstance, plan: NetworkPlan, affinity: str | None) -> dict:
    """What describes the instance beside its cell: its variant, and its stack's params (what
    the pass on ``cpus`` pinned: ``affinity``)."""
    params = inst.stack.describe()
    if plan.cpus:
        params["affinity"] = affinity
    return {"variant": inst.stack.variant, "params": params}


def _result(inst: NetInstance, op: wl.NetOp, s: Series, series: dict, plan: NetworkPlan,
            affinity: str | None, target: float) -> Result:
    samples = s.samples
    wires = [x.metrics["wire"] for x in samples if x.metrics.get("wire")]
    metrics = {
        "unit": "bytes/s", "role": inst.stack.variant_role(),
        "engine": samples[-1].metrics.get("engine"),
        "gbit_per_s": statistics.median(s.values()) * 8 / 1e9,
        "retransmits": median(samples, "retransmits"),
        "files_per_s": median(samples, "files_per_s"),
        "cpu": CpuUse.mean(samples).to_dict(),
        "cpu_s_per_gb": {end: median(samples, f"cpu_s_per_gb_{end}")
                         for end in ("a", "b", "system", "unattributed")},
        "busiest_daemon_core": median(samples, "busiest_daemon_core"),
        "daemon_cpu_s_per_gb": {name: statistics.median(x.metrics["daemon_cpu_s_per_gb"]
                                                        .get(name, 0.0) for x in samples)
                                for name in samples[-1].metrics.get("daemon_cpu_s_per_gb", {})},
        "bytes_moved": samples[-1].bytes_moved,
        "bytes_moved_per_sample": [x.bytes_moved for x in samples],
        "wire": _wire_summary(wires, inst.canary),
        "timing": samples[-1].metrics.get("timing") or "iperf3's receiver clock",
        "shared_cpus": inst.link.shared_cpus,
        "emulated_peer": inst.link.emulated_peer,
    }
    if not inst.stack.accel:
        metrics["accel_env"] = sorted(inst.stack.accel_env())
    return flow.summarise(inst.stack, _cell(inst, op, plan), s, series, target=target,
                          own=flow.Own(metrics, _attrs(inst, plan, affinity),
                                       cause=lambda cv: _likely_cause(inst, samples)))


def _wire_summary(wires: list[dict], canary: dict | None) -> dict:
    if not wires:
        return {"verdict": "not checked", "canary": canary}
    last = wires[-1]
    return {"verdict": "plaintext" if any(w["verdict"] == "plaintext" for w in wires)
            else "encrypted",
            "packets": sum(w["packets"] for w in wires),
            "median_packet_bytes": statistics.median(w["median_packet_bytes"] for w in wires
                                                     if w["median_packet_bytes"] is not None),
            "max_packet_bytes": max(w["max_packet_bytes"] or 0 for w in wires),
            "entropy_bits_per_byte": last["entropy_bits_per_byte"], "protocols": last["protocols"],
            "plaintext_packets": sum(w["plaintext_packets"] for w in wires),
            "reasons": sorted({r for w in wires for r in w["reasons"]}), "canary": canary,
            **({"expected": last["expected"]} if last.get("expected") else {})}


def _likely_cause(inst: NetInstance, samples) -> str:
    moved = drift_cause(samples)
    if moved:
        return moved
    retrans = [x.metrics.get("retransmits") or 0 for x in samples]
    if statistics.median(retrans) > 100:
        return (f"TCP retransmits ({statistics.median(retrans):.0f} per sample): TCP's loss "
                "recovery, set off by packets a tunnel's queue dropped or by ACKs late on CPUs "
                "both ends share, varies from sample to sample")
    if inst.stack.daemon_pids():
        return ("the stack's daemons and the traffic generator competing for "
                f"{cpu.usable_cores()} core(s)")
    return "the machine itself (other work on its cores, the hypervisor)"
