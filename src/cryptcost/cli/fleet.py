"""``cryptcost fleet run``: one plan on several hosts at once over ssh, each
run imported here, the hosts side by side (:mod:`cryptcost.fleet`)."""

from __future__ import annotations

import argparse
import shlex
import sys

from rich.markup import escape

from cryptcost.cli.common import (add_peer_options, open_store, out, peer_options, print_json,
                                  validate_writable, write_output)
from cryptcost.cli.report import members
from cryptcost.errors import UserError
from cryptcost.lifecycle.resources import Resources, install_signal_handlers
from cryptcost.report.fleet import build
from cryptcost.report.terminal import fleet_tables
from cryptcost import fleet
from cryptcost.workloads.plan import SUITES, load


DEFAULT_REPORT = "cryptcost-fleet.html"


def add_parser(sub, common) -> None:
    p = sub.add_parser("fleet", parents=[common],
                       help="run one plan on several hosts at once over ssh, and compare them")
    fsub = p.add_subparsers(dest="fleet_command", metavar="ACTION", required=True)
    r = fsub.add_parser("run", parents=[common],
                        help="run the plan on every host at once; import each run here")
    r.add_argument("--hosts", metavar="H1,H2,…|@INVENTORY",
                   help="hosts as ssh names them, or @FILE: an Ansible-style INI inventory")
    r.add_argument("--pairs", metavar="A:B,…",
                   help="then, for each pair, the network stacks from A to B (cryptcost network "
                        "--link peer:B, run on A; A must reach B with ssh as this host reaches A)")
    r.add_argument("--pair-stacks", default="all", metavar="LIST",
                   help="the network stacks of --pairs (default: all that run on a peer)")
    r.add_argument("--pair-options", default="", metavar="'OPTIONS'",
                   help="more options for each pair's 'cryptcost network', as one string, e.g. "
                        "'--workloads send,receive --seconds 5'")
    r.add_argument("--suite", choices=SUITES, help="the suite each host runs (default: quick)")
    r.add_argument("--plan", metavar="FILE.toml", help="a plan file, sent to each host")
    r.add_argument("-o", "--report", default=DEFAULT_REPORT, metavar="FILE",
                   help=f"the fleet's HTML report to write (default: {DEFAULT_REPORT})")
    r.add_argument("--no-report", action="store_true", help="write no HTML report")
    r.add_argument("--json", action="store_true",
                   help="print one JSON object: each host's run, and the fleet report")
    add_peer_options(r, "on each host")
    r.add_argument("run_args", nargs=argparse.REMAINDER, metavar="-- RUN-OPTION …",
                   help="options passed to each host's 'cryptcost run' (after --), e.g. "
                        "-- --time-budget 10m")
    r.set_defaults(func=run)


def run(args) -> int:
    if not args.hosts and not args.pairs:
        raise UserError("fleet run: name --hosts, --pairs or both")
    hosts = fleet.parse_hosts(args.hosts) if args.hosts else []
    pairs = fleet.parse_pairs(args.pairs)
    if args.suite and args.plan:
        raise UserError("fleet run: --suite or --plan, not both")
    plan_text = None
    if args.plan:
        try:
            plan_text = open(args.plan).read()
        except OSError as exc:
            raise UserError(f"cannot read {args.plan}: {exc.strerror}") from None
        load(None, args.plan)                        # a malformed plan fails here, not on each host
    if not args.no_report:
        validate_writable(args.report)
    extra = args.run_args[1:] if args.run_args[:1] == ["--"] else args.run_args
    run_args = (["--suite", args.suite] if args.suite else []) + extra
    store = open_store(args)
    install_signal_handlers()
    say = (lambda line: print(line, file=sys.stderr)) if args.json else out.print
    opts = peer_options(args)
    pair_options = shlex.split(args.pair_options)
    runs: list[fleet.HostRun] = []
    with Resources() as res:
        workdir = res.tmpdir("cryptcost-fleet-")
        if hosts:
            runs += fleet.run_fleet([fleet.HostRun(h) for h in hosts],
                                    lambda hr: fleet.local_args(run_args), opts, res=res,
                                    plan_text=plan_text, store=store, workdir=workdir, say=say)
        for wave in fleet.waves(pairs):
            runs += fleet.run_fleet([fleet.HostRun(a, b) for a, b in wave],
                                    lambda hr: fleet.pair_args(hr.peer, opts, args.pair_stacks,
                                                               pair_options),
                                    opts, res=res,
                                    plan_text=None, store=store, workdir=workdir, say=say)
    done = [hr for hr in runs if hr.run_id]
    columns = members(store, [hr.run_id for hr in done], [hr.label for hr in done])
    doc = build(columns)
    if columns and not args.no_report:
        from cryptcost.report.render import render_fleet
        write_output(args.report, render_fleet("html", columns))
    if args.json:
        print_json({"hosts": [{"host": hr.host, "peer": hr.peer, "run": hr.run_id,
                               "error": hr.error, "seconds": round(hr.seconds, 1)}
                              for hr in runs], **doc})
    else:
        for table in fleet_tables(doc):
            out.print(table)
        for hr in runs:
            if hr.error:
                out.print(escape(f"{hr.label}: FAILED: {hr.error}"))
    if done:
        say("rebuild this report: cryptcost report " + " ".join(str(hr.run_id) for hr in done)
            + " [--format md|html|json|csv]")
    return 1 if any(hr.error for hr in runs) else 0

