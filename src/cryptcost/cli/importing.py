"""``cryptcost import FILE.json``: add a run exported on any host to the store
(a fleet in one store; compare hosts with ``cryptcost compare``)."""

from __future__ import annotations

import json

from cryptcost.cli.common import open_store, out
from cryptcost.errors import UserError


def add_parser(sub, common) -> None:
    p = sub.add_parser("import", parents=[common],
                       help="add a run exported with report --format json")
    p.add_argument("file", metavar="FILE.json")
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        with open(args.file) as fh:
            data = json.load(fh)
    except OSError as exc:
        raise UserError(f"cannot read {args.file}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{args.file} is not JSON: {exc.msg} at line {exc.lineno}") from None
    store = open_store(args)
    run_id = store.import_run(data)
    out.print(f"imported {args.file} as run {run_id} ({len(data['results'])} results)")
    return 0
