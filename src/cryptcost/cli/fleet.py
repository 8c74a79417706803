"""``cryptcost fleet run``: one plan on several hosts at once over ssh, each
run imported here, the hosts side by side (:mod:`cryptcost.runner.fleet`)."""

from __future__ import annotations

import argparse
import shlex
import sys

from rich.table import Table

from cryptcost.cli.common import add_peer_options, open_store, out, peer_options, print_json
from cryptcost.errors import UserError
from cryptcost.lifecycle.resources import Resources, install_signal_handlers
from cryptcost.record import Stored
from cryptcost.report.fleet import differences, side_by_side
from cryptcost.runner import fleet
from cryptcost.units import rate
from cryptcost.workloads.plan import SUITES, load


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
    r.add_argument("--json", action="store_true",
                   help="print one JSON object: each host's run, and the side-by-side rows")
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
    done = [(hr.label, [Stored.of(d) for d in store.results(hr.run_id)]) for hr in runs
            if hr.run_id]
    rows = side_by_side(done)
    env = differences([(hr.host, store.run(hr.run_id).host) for hr in runs
                       if hr.run_id and not hr.peer])
    if args.json:
        print_json({"hosts": [{"host": hr.host, "peer": hr.peer, "run": hr.run_id,
                               "error": hr.error, "seconds": round(hr.seconds, 1)}
                              for hr in runs],
                    "results": rows, "environment": env})
    else:
        _print(rows, [h for h, _ in done])
        first = next((hr.host for hr in runs if hr.run_id and not hr.peer), None)
        for host, diffs in env.items():
            out.print(f"{host} against {first}: " + ("; ".join(
                f"{d['what']} {d['b']} ({d['a']} on {first})" for d in diffs) or "no difference "
                "in CPU, crypto flags, kernel, crypto drivers or tools"))
    return 1 if any(hr.error for hr in runs) else 0


def _print(rows: list[dict], hosts: list[str]) -> None:
    if not rows:
        out.print("no host returned a result")
        return
    t = Table(title="The hosts side by side (median, and overhead against the baseline)",
              title_justify="left")
    t.add_column("result")
    for h in hosts:
        t.add_column(h, justify="right")
    for row in rows:
        cells = []
        for h in hosts:
            got = row["hosts"].get(h)
            if got is None:
                cells.append("—")
                continue
            speed = rate(got["median"]) if got["per"] == "bytes" else f"{got['median']:.0f}/s"
            over = (f" ({got['overhead'] * 100:+.1f} %{'' if got['significant'] else ' ns'})"
                    if got["overhead"] is not None else "")
            cells.append(speed + over)
        t.add_row(row["label"], *cells)
    out.print(t)
