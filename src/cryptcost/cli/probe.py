"""``cryptcost probe``: the host, its crypto drivers, tools and stacks."""

from __future__ import annotations

from cryptcost.cli.common import probe_host, out, print_json
from cryptcost.report.terminal import probe_tables


def add_parser(sub, common) -> None:
    p = sub.add_parser("probe", parents=[common],
                       help="describe this host and which stacks can run")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args) -> int:
    info = probe_host()
    if args.json:
        print_json(info)
        return 0
    show(info)
    return 0


def show(info: dict) -> None:
    for table in probe_tables(info):
        out.print(table)
    for note in info["notes"]:
        out.print(f"• {note}")
