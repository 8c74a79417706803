"""``cryptcost report [RUN] --format …``: export a stored run."""

from __future__ import annotations

import sys
from pathlib import Path

from cryptcost.cli.common import open_store, out
from cryptcost.errors import UserError
from cryptcost.report import export
from cryptcost.report.terminal import result_tables

FORMATS = ("terminal", "json", "csv")


def add_parser(sub, common) -> None:
    p = sub.add_parser("report", parents=[common], help="export a run as a table, JSON or CSV")
    p.add_argument("run_id", nargs="?", default="latest", metavar="RUN", help="run id (default: latest)")
    p.add_argument("--format", default="terminal", choices=FORMATS)
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=run)


def render(fmt: str, run, results: list[dict]) -> str:
    if fmt == "json":
        return export.to_json(run, results)
    if fmt == "csv":
        return export.to_csv(run, results)
    raise UserError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def run(args) -> int:
    store = open_store(args, create=False)
    run_ = store.run(args.run_id)
    results = store.results(run_.id)
    if args.format == "terminal":
        for table in result_tables(results):
            out.print(table)
        return 0
    text = render(args.format, run_, results)
    if args.output:
        try:
            Path(args.output).write_text(text)
        except OSError as exc:
            raise UserError(f"cannot write {args.output}: {exc.strerror}") from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
