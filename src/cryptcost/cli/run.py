"""``cryptcost run``: the main job — probe, measure a suite or plan, analyse,
print a ranked summary and the recommendation, write the HTML report."""

from __future__ import annotations

import argparse
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from cryptcost.cli.common import (add_host_options, add_peer_options, add_profile_option,
                                  linked_results, open_store, probe_host, ConsoleProgress, err, out,
                                  print_json, recorded_run, validate_writable)
from cryptcost.cli import check
from cryptcost.cli.plansaid import announce, planned
from cryptcost.errors import UserError
from cryptcost.host import disks
from cryptcost.lifecycle.resources import install_signal_handlers
from cryptcost.report import document, gateout
from cryptcost.report.gate import Threshold, parse_threshold
from cryptcost.report.terminal import summary_tables
from cryptcost.store import baselines
from cryptcost.store.db import Store
from cryptcost import suite
from cryptcost.suite import budget, ceilings
from cryptcost.suite.resume import Resume, Sitting, merged
from cryptcost.workloads.plan import SUITES
from cryptcost.workloads.seeds import parse_only

DEFAULT_REPORT = "cryptcost-report.html"


def add_parser(sub, common) -> None:
    p = sub.add_parser("run", parents=[common],
                       help="the main job: measure a suite, analyse, report")
    p.add_argument("--suite", choices=SUITES,
                   help="quick (default, about 4 min on 2 cores), standard, "
                   "seeds (the field reports' matrices), full")
    p.add_argument("--plan", metavar="FILE.toml", help="a plan file (see docs/plans.md)")
    p.add_argument("--resume", metavar="RUN",
                   help="measure into RUN (cut short, or cut to a budget) the parts of its plan "
                        "it does not hold whole, with the same --suite or --plan; on the host "
                        "that measured the rest")
    p.add_argument("--only", metavar="R4[,R5]",
                   help="with --suite seeds: only the parts of these field reports (R1 … R5), "
                   "here and in the guest; the report shows their blocks alone")
    p.add_argument("--again", metavar="R1[,R3]",
                   help="with --resume and --suite seeds: measure anew the parts of these field "
                        "reports the run holds whole (a noisy sitting's), here and in the guest; "
                        "what it held of each is dropped as the part begins")
    _add_model_options(p)
    p.add_argument("-o", "--report", default=DEFAULT_REPORT, metavar="FILE",
                   help=f"HTML report to write (default: {DEFAULT_REPORT})")
    p.add_argument("--no-report", action="store_true", help="write no HTML report")
    p.add_argument("--details", action="store_true",
                   help="print every result, the cost split, the findings and the "
                        "recommendations in full before the answer (cryptcost report --details "
                        "prints them later)")
    p.add_argument("--time-budget", metavar="DURATION",
                   help="plan the run to fit, e.g. 10m: fewer samples, then every part "
                   "thinned (block sizes, workloads, CPU counts), then whole later parts; the "
                   "report lists what was left out")
    p.add_argument("--until", metavar="WHEN",
                   help="begin no part that its estimate says would end after WHEN (05:30, "
                        "this host's local time, or a duration from now: 2h): a sitting that "
                        "ends on a part's boundary, nothing thinned; --resume measures the rest")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would run and the estimate, then stop")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (results and analysis; with --dry-run, the plan "
                        "and its estimates)")
    add_profile_option(p)
    p.add_argument("--against", metavar="NAME",
                   help="end with the regression gate against baseline NAME: its verdict, and "
                        "exit 1 on a regression (see cryptcost check)")
    check.add_gate_options(p)
    _add_guest_options(p)
    add_host_options(p)
    p.set_defaults(func=run)


def _add_guest_options(p) -> None:
    """run --vm, and the guest's own share of it."""
    p.add_argument("--vm", action="store_true",
                   help="also run what this host's kernel cannot (dm-crypt, kernel ESP, NFS…) "
                        "under Debian's stock kernel in cryptcost vm's qemu guest, after this "
                        "host's share: its results are stored as emulated runs, linked to this "
                        "one, and the report's field reports read them where this host has none")
    p.add_argument("--vm-timeout", type=float, metavar="S",
                   help="with --vm: kill a guest after S seconds (default: ten times the "
                        "estimate at this host's speed, or three times what earlier guest runs "
                        "of this plan took against theirs; at least 1800)")
    p.add_argument("--vm-cpus", type=int, metavar="N",
                   help="with --vm: each guest's CPUs (default 2, at most this host's); under "
                        "TCG a guest keeps about one core busy whatever it has")
    # the guest's share, as the host's run --vm writes it (cryptcost.suite.guest)
    p.add_argument("--parts", metavar="FILE.json", help=argparse.SUPPRESS)
    # with --parts and --time-budget: the slowdown the host planned the guest's share at
    p.add_argument("--budget-scale", type=float, help=argparse.SUPPRESS)


def _add_model_options(p) -> None:
    """What the answer predicts for (a device, a link), or a peer to measure across."""
    p.add_argument("--device-speed", metavar="RATE",
                   help="predict throughput on a device, e.g. 3GB/s")
    p.add_argument("--link", metavar="LINK",
                   help="predict throughput over a link: 1GbE, 10GbE, 2.5Gbit; or peer:HOST: "
                        "measure the network stacks from this host to HOST over ssh")
    add_peer_options(p)
    p.add_argument("--delay", type=float, metavar="MS",
                   help="milliseconds added to every round trip of each network table's netns "
                        "link (netem), as a plan's network.delay_ms")


def run(args) -> int:
    """Validate → compile → run here → run the guest's share → analyse → report."""
    return main(RunCommand.of(args))


@dataclass(frozen=True)
class RunCommand:
    """What ``cryptcost run`` was asked, typed once from its command line (:meth:`of`, which
    refuses bad input before anything is recorded): the plan asked (``suite.Asked``), the
    store and the host's settings (as ``open_store`` and ``recorded_run`` read them), how it
    answers, and the regression gate's options (as ``cryptcost check`` reads them)."""

    asked: suite.Asked
    db: str | None = None
    page_reporting: str = "hold"
    report: str | None = DEFAULT_REPORT          # None: --no-report
    details: bool = False
    json: bool = False
    dry_run: bool = False
    vm_timeout: float | None = None
    vm_cpus: int | None = None
    against: str | None = None
    threshold: Threshold | None = None
    strict: bool = False
    format: str = "table"
    gate_output: str | None = None

    @classmethod
    def of(cls, args) -> "RunCommand":
        _refuse(args)                           # bad input fails before anything is recorded
        return cls(_asked(args, _resumable(args)), args.db, args.page_reporting,
                   None if args.no_report else args.report, args.details, args.json,
                   args.dry_run, args.vm_timeout, args.vm_cpus, args.against,
                   parse_threshold(args.threshold), args.strict, args.format, args.gate_output)


def main(job: RunCommand) -> int:
    """The main job: validate → compile (``suite.prepare``) → run here → run the guest's share
    → analyse → report."""
    prepared = suite.prepare(job.asked, _Calibration(job.db))
    resume = prepared.resume
    host = None
    if resume is not None:                      # the host is checked before anything is said
        host = probe_host()
        resume.refuse_another_host(host)
    announce(prepared)
    sitting = Sitting.of(prepared, host or {}, ceilings.LABEL)
    for line in sitting.lines():
        err.print(line)
    if job.dry_run:
        if job.json:
            print_json(planned(prepared))
        return 0
    host = host or probe_host()
    install_signal_handlers()
    started = time.monotonic()
    with recorded_run(job, "run", host, resume and resume.run_id) as (store, run_id, sink):
        outcome = _here(job, prepared, sitting, Recording(store, run_id, sitting), sink, host,
                        started)
    guest_runs = _guests(job, prepared, store, run_id, outcome, sitting)
    return _answer(job, store, run_id, prepared, outcome, guest_runs,
                   time.monotonic() - started)


def _refuse(args) -> None:
    """What the arguments cannot mean, in one line, before anything is recorded."""
    if args.parts and (args.suite or args.plan or args.vm or args.only or args.resume):
        raise UserError("--parts is the guest's share of a run --vm: it takes no --suite, "
                        "--plan, --vm, --only or --resume")
    if args.budget_scale is not None and not (args.parts and args.time_budget
                                              and args.budget_scale > 0):
        raise UserError("--budget-scale goes with --parts and --time-budget, and is positive")
    if args.again is not None and args.resume is None:
        raise UserError("--again goes with --resume RUN: it measures anew parts a run holds")
    if args.vm_timeout is not None and not args.vm:
        raise UserError("--vm-timeout goes with --vm")
    if args.vm_cpus is not None:
        if not args.vm:
            raise UserError("--vm-cpus goes with --vm")
        if not 1 <= args.vm_cpus <= (os.cpu_count() or 1):
            raise UserError(f"--vm-cpus must be between 1 and this host's {os.cpu_count() or 1} "
                            f"CPUs, not {args.vm_cpus}")
    if args.vm and os.geteuid() != 0:
        raise UserError("--vm needs root: the guest reads this host's root filesystem as root")
    if not args.no_report:
        validate_writable(args.report)
    if args.against:                            # an unknown name, before anything is measured
        baselines.get(open_store(args, create=False), args.against)


class Recording:
    """The run's record as this sitting adds to it (:meth:`Sitting.base`)."""

    def __init__(self, store, run_id: int, sitting: Sitting):
        self.store, self.run_id, self.base = store, run_id, sitting.base()

    def __call__(self, **extra) -> None:
        self.store.update_extra(self.run_id, **merged(self.base, **extra))


def _here(job: RunCommand, prepared: suite.Prepared, sitting: Sitting, record: Recording, sink,
          host: dict, started: float) -> suite.SuiteOutcome:
    """This host's share of the plan, measured into the run, and what the run records of it:
    its plan, what it left out (the guests' budgets' too), this host's disks and links, each
    part's time as it ends, and the sitting's since ``started``."""
    plan, resume = prepared.plan, prepared.resume
    if not job.json:
        for note in host["notes"]:                    # the host as quieted for the run
            err.print(f"• {note}")
    # what a budget left out of the guests' shares is this run's to tell
    guest_cut = [{**c, "stack": c["what"], "guest_share": gp.share.plan.name}
                 for gp in prepared.guest if prepared.vm for c in gp.share.plan.cannot_run]
    record(suite=plan.name, model=prepared.model, only=sitting.only(),
           estimate_seconds=round(prepared.seconds, 1), time_budget=prepared.budget_s,
           until=prepared.until_at_said(),
           skipped=[{**c, "stack": c["what"]} for c in plan.cannot_run] + guest_cut,
           **sitting.said())
    # this host's disks (timed read-only) and links, for the answer's predictions; not in a
    # guest's share (its disks are qemu's), nor again when a run resumes
    if not job.asked.parts and not resume:
        record(**disks.survey(any(p.storage for p in plan.parts),
                              any(p.network for p in plan.parts), say=err.print))
    try:
        outcome = suite.run_plan(plan, sink=sink, host=host, clock=prepared.from_now(),
                                 have=resume.have if resume else frozenset(),
                                 hooks=suite.Hooks(progress=_progress,
                                                   before_part=lambda label: sitting.drop(
                                                       record.store, record.run_id, label),
                                                   on_part=lambda so_far: record(
                                                       **sitting.ended(so_far))))
    finally:                                 # a run cut short keeps its time too
        sitting.wall_seconds = round(time.monotonic() - started, 1)
        record(wall_seconds=sitting.wall_seconds, **sitting.said())
    outcome.skipped = merged(record.base, skipped=outcome.skipped + guest_cut)["skipped"]
    outcome.failed = merged(record.base, failed=outcome.failed)["failed"]
    record(skipped=outcome.skipped, failed=outcome.failed, **sitting.ended(outcome))
    return outcome


def _guests(job: RunCommand, prepared: suite.Prepared, store, run_id: int,
            outcome: suite.SuiteOutcome, sitting: Sitting) -> list[int]:
    """With --vm, the guests' shares after this host's; the run's guest runs."""
    from cryptcost.suite.guests import Guests, run_guests
    if not (prepared.vm and prepared.guest):
        return list(sitting.base().get("guest_runs", []))
    began = time.monotonic()
    try:
        to = Guests(store, run_id, sitting, job.vm_timeout, err.print, job.vm_cpus)
        return run_guests(prepared, to, outcome)
    finally:                                  # the sitting's whole time, its guests' too
        sitting.guests_seconds = round(time.monotonic() - began, 1)
        if prepared.resume is not None:
            store.update_extra(run_id, sittings=merged(sitting.base(),
                                                       **sitting.said())["sittings"])


def _answer(job: RunCommand, store, run_id: int, prepared: suite.Prepared,
            outcome: suite.SuiteOutcome, guest_runs: list[int], seconds: float) -> int:
    """The run analysed: the report written, the gate's verdict, the answer printed (or the
    JSON); exit 1 on a failure or a regression."""
    run_ = store.run(run_id)
    results = store.results(run_id)
    guests = linked_results(store, run_)
    model = prepared.model
    doc = document.build(run_, results, model, guests=guests)
    if job.report:
        from cryptcost.report.render import render
        Path(job.report).write_text(render("html", run_, results, model, guests=guests))
    verdict = (check.judged(store, job.against, run_id, job.threshold, job.strict)
               if job.against else None)
    if job.json:
        print_json({"run": run_id, "suite": prepared.plan.name, "results": results,
                    "report": doc, "skipped": outcome.skipped, "failed": outcome.failed,
                    "guest_runs": guest_runs, "resumed": prepared.resume is not None,
                    **({"gate": verdict.to_dict()} if verdict else {})})
    else:
        for table in summary_tables(doc, width=out.width, details=job.details):
            out.print(table)
        out.print(f"run {run_id} stored in {store.path}; {seconds:.0f} s"
                  + (f" (sitting {len(run_.extra['sittings'])})" if prepared.resume else "")
                  + (f"; the guest's: run(s) {', '.join(map(str, guest_runs))}, emulated"
                     if guest_runs else "")
                  + (f"; report: {job.report}" if job.report else ""))
    for line in outcome.failed:
        err.print(f"error: {line}")
    gated = (gateout.show(verdict, out, job.format, job.gate_output)
             if verdict and not job.json else 0)
    return 1 if outcome.failed or gated or (verdict and verdict.exit_code) else 0


def _resumable(args) -> Resume | None:
    """``--resume RUN``'s run, if it can be resumed (a UserError says why not)."""
    if args.resume is None:
        return None
    store = open_store(args, create=False)
    try:
        resume = Resume.of(store, args.resume)
    finally:
        store.close()
    if args.again is None:
        return resume
    if args.suite != "seeds":
        raise UserError("--again picks field reports' parts of --suite seeds, not of "
                        + (f"suite {args.suite}" if args.suite else "this plan"))
    return resume.measure_again(parse_only(args.again, "--again"))


def _asked(args, resume: Resume | None) -> suite.Asked:
    """What the command line asks of the run."""
    return suite.Asked(args.suite, args.plan, parts=args.parts, only=args.only, resume=resume,
                       device_speed=args.device_speed, link=args.link,
                       peer={"ssh_config": args.ssh_config, "peer_sudo": args.peer_sudo,
                             "peer_command": args.peer_command},
                       delay_ms=args.delay, profile=args.profile, time_budget=args.time_budget,
                       budget_scale=args.budget_scale, until=args.until, vm=args.vm)


class _Calibration(suite.Calibration):
    """How far earlier runs of a plan here (or in the guest) were from their estimate (see
    suite.budget), read from the store ``db`` (None: the default one); nothing is created to
    read it."""

    def __init__(self, db: str | None) -> None:
        self.db = db

    def factor(self, name: str, guest: bool = False) -> tuple[float, int]:
        return self._read(name, guest, budget.calibration, (1.0, 0))

    def part_factors(self, name: str, guest: bool = False) -> dict[str, float]:
        return self._read(name, guest, budget.part_factors, {})

    def _read(self, name: str, guest: bool, how, none):
        from cryptcost.guest import GUEST_HOSTNAME
        from cryptcost.store.db import default_path
        if not Path(self.db or default_path()).is_file():
            return none                          # nothing to learn from, and nothing is created
        store = Store.open(self.db, create=False)
        try:
            return how(store.runs(), name, GUEST_HOSTNAME if guest else socket.gethostname())
        finally:
            store.close()


def _progress(what: str) -> ConsoleProgress:
    err.print(f"— {what}")
    return ConsoleProgress()
