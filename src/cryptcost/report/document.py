"""The report's content, independent of its format: one :class:`~cryptcost.report.records.
Document` of frozen records, built from a stored run, its results and their analysis. The
terminal, Markdown, HTML, JSON and CSV renderers are pure functions of it."""

from __future__ import annotations

from cryptcost.analysis import Analysis, analyze, answer, scaling
from cryptcost.analysis.bottleneck import Verdict
from cryptcost.model import Run
from cryptcost.record import Host, Skipped, Stored, Wire, read
from cryptcost.report import fieldreports
from cryptcost.report.absent import names_stack
from cryptcost.report.records import (CipherRow, Document, HostInfo, NetworkRow, NotMeasured,
                                      Ranked, RunInfo, SplitRow, StorageRow, UnstableGroup)
from cryptcost import units
from cryptcost.units import target_of

FORMAT_VERSION = 1

# What the cost split says, once for every format.
SPLIT_INTRO = ("Of each stack's cost against its reference (the plain filesystem), the share its "
               "twin pays too and the share that is its own, the crypto. The twin is the stack "
               "without its encryption, and the table says what it adds to the reference (for a "
               "FUSE stack, FUSE itself: a passthrough on the same FUSE library). (n.s.): not "
               "significant; (untested): one sample a side, or no comparison stored.")


# What the field-report blocks are, once for every format.
FIELD_REPORTS_INTRO = ("The five field reports cryptcost was built from: each conclusion they "
                       "draw is a claim, judged from this run — holds, does not hold, or cannot "
                       "be said here, with why and what would settle it — and each figure of "
                       "theirs beside the same comparison here (an overhead against the plaintext "
                       "baseline, or a ratio, which carries across hardware where absolute speeds "
                       "do not). A figure marked emulated was measured in cryptcost vm's qemu "
                       "guest under TCG, whose CPU is software: it shows what works and how stacks "
                       "relate within that guest, never a speed of this hardware, and what a "
                       "cipher costs there judges no claim. A comparison never mixes this host's "
                       "cells with a guest's.")


# A result whose interval never reached the run's target: marked beside its interval, explained once
# per cause.
UNSTABLE_MARK = "~"
UNSTABLE_INTRO = (f"{UNSTABLE_MARK} unstable: the 95 % interval stayed wider than the run's target "
                  "(±3 % of the median unless --ci-target or the plan set another) after the "
                  "samples the plan allows. Its median is one draw from that interval: compare it "
                  "only where the intervals do not overlap, and rerun with more samples "
                  "(--max-samples) or on a quieter host for a tighter figure. By likely cause:")


def ci_text(r: Stored) -> str:
    """A result's interval as ``±1.2 %``, marked when the result is unstable."""
    text = units.ci(list(r.ci95) if r.ci95 else None, r.median)
    return f"{text} {UNSTABLE_MARK}" if r.unstable else text


def _label(r: Stored) -> str:
    c = r.cell
    if c.kind == "storage":
        size = units.size(c.block_bytes) if c.block_bytes else ""
        return " ".join(str(x) for x in (c.stack, c.workload, c.op, size) if x)
    if c.kind == "network":
        return f"{c.stack} {c.workload}"
    threads = f"×{c.threads}" if (c.threads or 1) > 1 else ""
    accel = "" if c.accel is not False else "accel off"
    size = units.size(c.buffer_bytes) if c.buffer_bytes else ""
    return " ".join(str(x) for x in (c.engine, c.algorithm, size, threads, accel) if x)


def unstable_groups(results: list[dict] | list[Stored]) -> list[UnstableGroup]:
    """The unstable results, grouped by their likely cause, each group with
    its range of CVs: what the mark beside an interval means, said once."""
    groups: dict[str, list[Stored]] = {}
    for r in read(results):
        if r.unstable:
            groups.setdefault(r.likely_cause or "not known", []).append(r)
    out = []
    for cause, rs in sorted(groups.items(), key=lambda g: -len(g[1])):
        cvs = sorted(r.cv * 100 for r in rs if r.cv is not None)
        cv = (f"CV {cvs[0]:.1f} %" if len(cvs) == 1 or cvs[0] == cvs[-1] else
              f"CV {cvs[0]:.1f}–{cvs[-1]:.1f} %") if cvs else "CV not known"
        out.append(UnstableGroup(cause, cv, len(rs), tuple(_label(r) for r in rs),
                                 f"{cause} ({len(rs)}, {cv}): {', '.join(_label(r) for r in rs)}"))
    return out


def _significance(significant: bool | None) -> str:
    """The mark after a share: none when significant; a twin stored without its comparison is
    untested."""
    return "" if significant else " (n.s.)" if significant is False else " (untested)"


def build(run: Run, results: list[dict] | list[Stored], model: dict | None = None,
          guests: list[list[dict]] | list[list[Stored]] = ()) -> Document:
    """Everything a report shows, as plain data. ``guests``: the results of each emulated run
    linked to ``run`` (``run --vm``), which only the field reports read, marked emulated."""
    results = read(results)
    guests = [read(g) for g in guests]                 # each read once, here
    model = model if model is not None else run.extra.get("model", {})
    target, label = target_of(model or {})
    skipped = run.extra.get("skipped", [])
    only = run.extra.get("only") or []          # run --only: the field reports it ran
    a: Analysis = analyze(results, run.host, skipped, target=target, target_label=label)
    storage_rows, cipher_rows, network_rows = [], [], []
    for i, r in enumerate(results):
        if r.kind == "storage":
            storage_rows.append(storage_row(r, a.verdicts.get(i), a.cycles_per_byte.get(i)))
        elif r.kind == "network":
            network_rows.append(network_row(r, a.verdicts.get(i)))
        elif r.kind == "cipher":
            cipher_rows.append(cipher_row(r))
    host = Host.of(run.host)
    cpu = host.cpu
    blocks = [b for b in fieldreports.section(
        results, guests, [s for s in skipped if not _in_guest(Skipped.of(s), run, guests)])
        if not only or b["label"] in only]
    said = answer.answer(results, a.verdicts, a.split, a.recommendations, host,
                         run.extra.get("disks", []), run.extra.get("links", []), model or {})
    return Document(
        format="cryptcost-report", version=FORMAT_VERSION, answer=said,
        title=f"cryptcost run {run.id}" + (f" — {run.label}" if run.label else ""),
        run=RunInfo(run.id, run.command, run.status, run.started, run.finished,
                    run.extra.get("suite")),
        host=HostInfo(host.hostname, cpu.model, cpu.cores,
                      ", ".join(f for f, on in cpu.flags.items() if on), host.kernel, cpu.mhz,
                      cpu.governor or "not exposed",
                      round((host.memory_total or 0) / 2**30, 1)),
        recommendations=a.recommendations,
        ranking=tuple(Ranked(x.stack, ("=" if x.tie else "") + str(x.rank),
                             units.pct(x.relative_to_plain, signed=False)
                             if x.relative_to_plain is not None else "—") for x in a.ranking),
        findings=tuple(a.findings), tuning=tuple(a.tuning),
        predictions=tuple(p.to_dict() for p in a.predictions),
        split=tuple(SplitRow(
            x.stack, x.op, units.size(x.block_bytes) if x.block_bytes else "—",
            f"{x.reference} {units.rate(x.reference_bytes_per_s)} → "
            f"{x.twin} {units.rate(x.twin_bytes_per_s)} → {units.rate(x.stack_bytes_per_s)}",
            x.isolates, units.pct(x.total, signed=False),
            units.pct(x.shared, signed=False) + _significance(x.shared_significant),
            units.pct(x.own, signed=False) + _significance(x.own_significant), x.note,
            x.to_dict()) for x in a.split),
        split_intro=SPLIT_INTRO, target=label,
        scaling=a.scaling, scaling_rows=tuple(scaling.rows(a.scaling)),
        storage=tuple(storage_rows), ciphers=tuple(cipher_rows), network=tuple(network_rows),
        unstable=tuple(unstable_groups(results)), unstable_intro=UNSTABLE_INTRO,
        # run --only R4: the blocks of the reports it was asked for, no other
        field_reports=tuple(blocks), field_reports_grid=tuple(fieldreports.grid(blocks)),
        field_reports_intro=FIELD_REPORTS_INTRO + (
            f" This run measured the parts of {' and '.join(only)} only (run --only)."
            if only else ""),
        # one row per thing and reason: a stack skipped alike on 1 and 2 CPUs is said once; what
        # a linked guest measured instead is no reason for a row's absence
        not_measured=tuple({(m.what, m.why, m.install): m for m in (
            NotMeasured(s.what, s.reason + _in_guest(s, run, guests), s.install or "")
            for s in map(Skipped.of, skipped))}.values()),
        environment=tuple(_environment(host) + _sittings(run, results)),
        notes=tuple(host.notes), emulated=emulated_why(host))


def _measured_by(skipped: Skipped, results: list[Stored]) -> bool:
    """Whether ``results`` hold what ``skipped`` names: its stack (any variant of a bare name or
    of ``name:*``), or its cipher engine."""
    if skipped.engine and not skipped.stack:
        return any(r.cell.engine == skipped.engine for r in results)
    return any(names_stack(skipped.stack or "", r.cell.stack or "") for r in results)


def _in_guest(skipped: Skipped, run: Run, guests: list[list[Stored]]) -> str:
    """What a linked guest run measured of what this run could not: said after the reason."""
    ids = [rid for rid, pool in zip(run.extra.get("guest_runs") or [], guests)
           if _measured_by(skipped, pool)]
    return (f"; measured in cryptcost vm's guest instead (emulated): run "
            f"{', '.join(map(str, ids))}") if ids else ""


def emulated_why(host: dict | Host) -> str | None:
    """Why a run's speeds are not real hardware's (``cryptcost vm``), or None."""
    emulated = Host.of(host).emulated
    if not emulated:
        return None
    return (f"Emulated: {emulated.why} (kernel {emulated.kernel}, {emulated.cpus} virtual CPUs). "
            "Read it for what works and how stacks relate within this run.")


def storage_row(r: Stored, verdict: Verdict | None = None, cpb: float | None = None
                ) -> StorageRow:
    """One storage result formatted for people (terminal and reports alike)."""
    c, median = r.cell, r.median
    return StorageRow(stack=c.stack, role=r.role, workload=c.workload, op=c.op,
                      block=units.size(c.block_bytes) if c.block_bytes else "—", qd=c.iodepth,
                      cpus=c.cpus,
                      median=f"{median:,.0f} op/s" if r.per == "ops" else units.rate(median),
                      ci=ci_text(r), n=r.n, iops=f"{r.iops:,.0f}" if r.iops else "—",
                      cpu_s_per_gib=f"{r.cpu_s_per_gib:.2f}" if r.cpu_s_per_gib else "—",
                      cycles_per_byte=f"{cpb:.1f}" if cpb else "—",
                      **_vs(r), cache=r.cache_mode or "", **_verdict(verdict),
                      notes=tuple(r.notes))


def _verdict(v: Verdict | None) -> dict:
    """A row's bottleneck, its explanation and where the busy CPU went by layer (from the
    cell's profile; None without one)."""
    if v is None:
        return {"bottleneck": "", "explanation": "", "layers": None}
    return {"bottleneck": v.bottleneck, "explanation": v.sentence,
            "layers": dict(v.profile.of_busy) if v.profile else None}


def _vs(r: Stored) -> dict:
    """A result's change against its baseline: as one text (``-63.2 % vs plain``), and its
    parts, so that no renderer parses the text back."""
    if r.overhead is None:
        return {"vs": "—", "change": "—", "against": ""}
    shown = units.pct(-r.overhead) if r.overhead_significant else \
        "n.s." if r.overhead_significant is False else f"{units.pct(-r.overhead)} untested"
    return {"vs": f"{shown} vs {r.baseline}", "change": shown, "against": r.baseline or ""}


def network_row(r: Stored, verdict: Verdict | None = None) -> NetworkRow:
    """One network result formatted for people (terminal and reports alike)."""
    c, wire = r.cell, r.wire or Wire()

    def cpu(end: str) -> str:
        return f"{r.cpu_s_per_gb[end]:.2f}" if r.cpu_s_per_gb.get(end) is not None else "—"
    median = r.bytes_per_s
    accel = "" if c.accel is not False else {True: " (verified)", False: " (NOT verified)"}.get(
        r.accel_verified, " (unverified)")
    return NetworkRow(
        stack=c.stack + accel, role=r.role, workload=c.workload, streams=c.streams or 1,
        link=f"{c.link}{f' to {c.peer}' if c.peer else ''} MTU {c.mtu}"
             + (f" +{c.delay_ms:g} ms RTT" if c.delay_ms else ""),
        median=units.rate(median), gbit=f"{median * 8 / 1e9:.2f} Gbit/s" if median else "—",
        ci=ci_text(r), n=r.n, cpu_a=cpu("a"), cpu_b=cpu("b"), cpu_system=cpu("system"),
        retransmits=f"{r.retransmits:,.0f}" if r.retransmits is not None else "—",
        packet=f"{wire.median_packet_bytes:,.0f} B" if wire.median_packet_bytes else "—",
        wire=wire.verdict + (" (by design)" if wire.expected else ""), **_vs(r),
        negotiated=", ".join(f"{k} {v}" for k, v in r.negotiated.items() if k != "from"),
        **_verdict(verdict), notes=tuple(r.notes))


def cipher_row(r: Stored) -> CipherRow:
    """One cipher result formatted for people (terminal and reports alike)."""
    c = r.cell
    verified = {True: "verified", False: "NOT effective", None: ""}[r.accel_verified]
    return CipherRow(engine=c.engine, algorithm=c.algorithm, buffer=units.size(c.buffer_bytes),
                     threads=c.threads,
                     accel=("on" if c.accel else "off") + (f" ({verified})" if verified else ""),
                     median=units.rate(r.bytes_per_s), ci=ci_text(r), n=r.n,
                     warning=r.warning or "",
                     note=r.notes[-1] if not c.accel and r.notes else r.warning or "")


def _sittings(run: Run, results: list[Stored]) -> list[tuple[str, str]]:
    """A run resumed (run --resume): when each sitting began, and how far the host's CPU speed
    moved between them (the yardstick its parts' samples timed) where it can be told."""
    sittings = run.extra.get("sittings") or []
    if len(sittings) < 2:
        return []
    began = ", ".join(str(s.get("started") or "?")[:16].replace("T", " ") for s in sittings)
    changed = sorted({t for s in sittings for t in s.get("tools_changed") or []})
    speeds = sitting_yardsticks(sittings, results)
    told = [(i + 1, v) for i, v in enumerate(speeds) if v]
    if len(told) > 1:
        low, high = min(v for _, v in told), max(v for _, v in told)
        within = [r.yardstick for r in results if r.yardstick]
        moved = ("the yardstick timed before every sample (a fixed SHA-256) ran at "
                 + ", ".join(f"{units.rate(v)} in sitting {i}" for i, v in told)
                 + f" (medians of its parts' results): the host's CPU speed moved "
                 f"{high / low - 1:.0%} between sittings, where its results' own medians "
                 f"spread {max(within) / min(within) - 1:.0%}")
    else:
        moved = "how far the host's speed moved between sittings is not measured"
    return [("sittings", f"{len(sittings)}, begun {began} (run --resume): each part was measured "
             "whole in one sitting, against baselines of the same rounds; parts of different "
             "sittings, and cipher ceilings kept from an earlier one, were measured apart in "
             f"time; {moved}"
             + (f"; measuring programs changed between them: {'; '.join(changed)}"
                if changed else ""))]


def sitting_yardsticks(sittings: list[dict], results: list[Stored]) -> list[float | None]:
    """Each sitting's median yardstick (bytes/s) over the results of the parts it ended (a part
    measured again belongs to the last sitting that ended it); None where none carries one."""
    import statistics
    owner = {label: i for i, s in enumerate(sittings) for label in s.get("parts_ended") or []}
    by: list[list[float]] = [[] for _ in sittings]
    for r in results:
        if r.yardstick and r.cell.part in owner:
            by[owner[r.cell.part]].append(r.yardstick)
    return [statistics.median(v) if v else None for v in by]


def _environment(host: Host) -> list[tuple[str, str]]:
    rows = [("cryptcost", str(host.cryptcost)), ("Python", str(host.python))]
    rows += [(f"tool {k}", v) for k, v in sorted(host.tools.items()) if v]
    for name in ("aes", "xts(aes)", "cbc(aes)", "gcm(aes)", "sha256", "chacha20"):
        d = host.crypto_drivers.get(name)
        if d:
            rows.append((f"kernel {name}",
                         f"{d.driver} (priority {d.priority}, {d.implementation})"))
    feats = host.features
    rows.append(("kernel features",
                 ", ".join(f"{k}{'' if present else ' ✗'}" for k, present in feats.items())))
    return rows
