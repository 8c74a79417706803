"""``cryptcost run``: the main job — probe, measure a suite or plan, analyse,
print a ranked summary and the recommendation, write the HTML report."""

from __future__ import annotations

import time
from pathlib import Path

from cryptcost.cli.common import (add_host_options, add_peer_options, add_profile_option,
                                  open_store, probe_host, ConsoleProgress, err, out, print_json,
                                  recorded_run, validate_writable)
from cryptcost.lifecycle.resources import install_signal_handlers
from cryptcost.report import document
from cryptcost.report.terminal import summary_tables
from cryptcost import suite
from cryptcost.suite import budget
from cryptcost.workloads.plan import SUITES

DEFAULT_REPORT = "cryptcost-report.html"


def add_parser(sub, common) -> None:
    p = sub.add_parser("run", parents=[common],
                       help="the main job: measure a suite, analyse, report")
    p.add_argument("--suite", choices=SUITES,
                   help="quick (default, about 5 min on 2 cores), standard, "
                   "seeds (the field reports' matrices), full")
    p.add_argument("--plan", metavar="FILE.toml", help="a plan file (see docs/plans.md)")
    p.add_argument("--device-speed", metavar="RATE",
                   help="predict throughput on a device, e.g. 3GB/s")
    p.add_argument("--link", metavar="LINK",
                   help="predict throughput over a link: 1GbE, 10GbE, 2.5Gbit; or peer:HOST: "
                        "measure the network stacks from this host to HOST over ssh")
    add_peer_options(p)
    p.add_argument("--delay", type=float, metavar="MS",
                   help="milliseconds added to every round trip of each network table's netns "
                        "link (netem), as a plan's network.delay_ms")
    p.add_argument("-o", "--report", default=DEFAULT_REPORT, metavar="FILE",
                   help=f"HTML report to write (default: {DEFAULT_REPORT})")
    p.add_argument("--no-report", action="store_true", help="write no HTML report")
    p.add_argument("--time-budget", metavar="DURATION",
                   help="plan the run to fit, e.g. 10m: fewer samples, "
                   "parts, block sizes or workloads; the report lists what was left out")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would run and the estimate, then stop")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (results and analysis)")
    add_profile_option(p)
    add_host_options(p)
    p.set_defaults(func=run)


def _extent(table: dict) -> str:
    """A storage or network table's CPU counts, acceleration and profiled round, as the plan
    gives them."""
    out = f" on {table['cpus']} CPU(s)" if table.get("cpus") else ""
    out += ", acceleration on and off" if "off" in table.get("accel", []) else ""
    return out + (", profiled (perf)" if table.get("profile") else "")


def announce(prepared: suite.Prepared) -> None:
    plan, seconds, factor = prepared.plan, prepared.seconds, prepared.factor
    err.print(f"suite {plan.name}" + (f" ({plan.label})" if plan.label else "") + ":")
    for part in plan.parts:
        what = []
        if part.ciphers is not None:
            c = part.ciphers
            what.append(f"ciphers ({', '.join(c.get('algorithms') or ['every algorithm'])[:70]}…)"
                        if c.get("algorithms") and len(', '.join(c['algorithms'])) > 70 else
                        f"ciphers ({', '.join(c.get('algorithms') or ['every algorithm'])})")
        if part.storage:
            s = part.storage
            what.append(f"storage {', '.join(s.get('stacks', ['all']))} × "
                        f"{', '.join(s.get('workloads', ['quick']))}"
                        + _extent(s))
        if part.network:
            n = part.network
            what.append(f"network {', '.join(n.get('stacks', ['all']))} × "
                        f"{', '.join(n.get('workloads', ['quick']))} over "
                        f"{n.get('link', 'netns')}"
                        + (f" with {n['delay_ms']:g} ms more per round trip"
                           if n.get("delay_ms") else "") + _extent(n))
        err.print(f"  {part.label}: " + "; ".join(what))
    for c in plan.cannot_run:
        if c.get("budget"):
            continue
        err.print(f"  cannot run {c['part']} {c['what']}: {c['reason']}"
                  + (f" (install: {c['install']})" if c.get("install") else ""))
    cut = [c for c in plan.cannot_run if c.get("budget")]
    if cut:
        err.print(f"  {cut[0]['budget']}:")
        for c in cut:
            err.print(f"    {c['part']}: {c['what']}"
                      + (f" ({c['detail']})" if c["detail"] else ""))
    scale, runs = factor
    if runs:
        err.print(f"estimated time: about {seconds * scale / 60:.1f} min (the model's "
                  f"{seconds / 60:.1f} min × {scale:.2f}, what the last {runs} run(s) of this "
                  "suite took here against theirs)")
    else:
        err.print(f"estimated time: about {seconds / 60:.1f} min if every series is stable at its "
                  "minimum number of samples; more if not (no earlier run of this suite here to "
                  "calibrate from)")


def run(args) -> int:
    # bad input fails before anything is recorded
    if not args.no_report:
        validate_writable(args.report)
    prepared = suite.prepare(args.suite, args.plan, device_speed=args.device_speed,
                             profile=args.profile,
                             link=args.link, delay_ms=args.delay,
                             time_budget=args.time_budget,
                             peer={"ssh_config": args.ssh_config, "peer_sudo": args.peer_sudo,
                                   "peer_command": args.peer_command},
                             calibrate=lambda name: _calibration(args, name))
    announce(prepared)
    if args.dry_run:
        return 0
    plan, model = prepared.from_now(), prepared.model
    host = probe_host()
    install_signal_handlers()
    started = time.monotonic()
    with recorded_run(args, "run", host) as (store, run_id, sink):
        if not args.json:
            for note in host["notes"]:                # the host as quieted for the run
                err.print(f"• {note}")
        store.update_extra(run_id, suite=plan.name, model=model,
                           estimate_seconds=round(prepared.seconds, 1),
                           time_budget=prepared.budget_s,
                           skipped=[{**c, "stack": c["what"]} for c in plan.cannot_run])
        outcome = suite.run_plan(plan, sink=sink, host=host,
                                 progress_factory=lambda what: _progress(what))
        store.update_extra(run_id, skipped=outcome.skipped, failed=outcome.failed,
                           wall_seconds=round(time.monotonic() - started, 1))
    run_ = store.run(run_id)
    results = store.results(run_id)
    doc = document.build(run_, results, model)
    if not args.no_report:
        from cryptcost.report.render import render
        Path(args.report).write_text(render("html", run_, results, model))
    if args.json:
        print_json({"run": run_id, "suite": plan.name, "results": results, "report": doc,
                    "skipped": outcome.skipped, "failed": outcome.failed})
    else:
        for table in summary_tables(doc, width=out.width):
            out.print(table)
        out.print(f"run {run_id} stored in {store.path}; {time.monotonic() - started:.0f} s"
                  + ("" if args.no_report else f"; report: {args.report}"))
    for line in outcome.failed:
        err.print(f"error: {line}")
    return 1 if outcome.failed else 0


def _calibration(args, suite_name: str) -> tuple[float, int]:
    """How far earlier runs of this suite here were from their estimate (see suite.budget)."""
    import socket
    from cryptcost.store.db import default_path
    if not Path(args.db or default_path()).is_file():
        return 1.0, 0                            # nothing to learn from, and nothing is created
    store = open_store(args, create=False)
    try:
        return budget.calibration(store.runs(), suite_name, socket.gethostname())
    finally:
        store.close()


def _progress(what: str) -> ConsoleProgress:
    err.print(f"— {what}")
    return ConsoleProgress()
