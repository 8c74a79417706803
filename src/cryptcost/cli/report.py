"""``cryptcost report [RUN] --format …``: a stored run as a table, Markdown,
HTML (charts), JSON or CSV. Every format is rebuilt from the store."""

from __future__ import annotations

import sys
from pathlib import Path

from cryptcost.cli.common import open_store, out
from cryptcost import units
from cryptcost.errors import UserError
from cryptcost.report import document
from cryptcost.report.render import FORMATS, render
from cryptcost.report.terminal import summary_tables

def add_parser(sub, common) -> None:
    p = sub.add_parser("report", parents=[common],
                       help="a run as a table, Markdown, HTML, JSON or CSV")
    p.add_argument("run_id", nargs="?", default="latest", metavar="RUN",
                   help="run id (default: latest)")
    p.add_argument("--format", default="terminal", choices=FORMATS)
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--device-speed", metavar="RATE",
                   help="cost model: predict on a device, e.g. 3GB/s")
    p.add_argument("--link", metavar="LINK", help="cost model: predict over a link, e.g. 1GbE")
    p.set_defaults(func=run)


def run(args) -> int:
    model = {"device_speed": args.device_speed} if args.device_speed else \
        {"link": args.link} if args.link else None
    if model:
        units.target_of(model)
    store = open_store(args, create=False)
    run_ = store.run(args.run_id)
    results = store.results(run_.id)
    if args.format == "terminal":
        for table in summary_tables(document.build(run_, results, model), width=out.width):
            out.print(table)
        return 0
    text = render(args.format, run_, results, model)
    if args.output:
        try:
            Path(args.output).write_text(text)
        except OSError as exc:
            raise UserError(f"cannot write {args.output}: {exc.strerror}") from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
