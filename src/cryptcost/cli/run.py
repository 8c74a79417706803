"""``cryptcost run``: the main job — probe, then measure, then summarise."""

from __future__ import annotations

from cryptcost.cli import ciphers as ciphers_cmd
from cryptcost.cli import probe as probe_cmd
from cryptcost.cli.common import out, print_json, recorded_run
from cryptcost.host.probe import probe
from cryptcost.report.terminal import cipher_table, skipped_table


def add_parser(sub, common) -> None:
    p = sub.add_parser("run", parents=[common], help="the main job: probe and measure everything available")
    ciphers_cmd.add_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args) -> int:
    ciphers_cmd.plan_from(args).validate()
    ciphers_cmd.policy_from(args)
    host = probe()
    if not args.json:
        probe_cmd.show(host)
    with recorded_run(args, "run", host) as (store, run_id, sink):
        outcome = ciphers_cmd.measure(args, host, sink)
    if args.json:
        print_json({"run": run_id, "host": host, "results": [r.to_dict() for r in outcome.results],
                    "skipped": outcome.skipped})
        return 0
    out.print(cipher_table([r.to_dict() for r in outcome.results]))
    if outcome.skipped:
        out.print(skipped_table(outcome.skipped))
    out.print(f"run {run_id} stored in {store.path}")
    return 0
