"""``cryptcost import FILE.json``: add a run exported on any host to the store
(a fleet in one store; compare hosts with ``cryptcost compare``)."""

from __future__ import annotations

import json

from cryptcost.cli.common import open_store, out
from cryptcost.errors import UserError
from cryptcost.store import baselines


def add_parser(sub, common) -> None:
    p = sub.add_parser("import", parents=[common],
                       help="add a run exported with report --format json")
    p.add_argument("file", metavar="FILE.json")
    p.add_argument("--replace", action="store_true",
                   help="an exported baseline whose name is taken here: point the name at the "
                        "imported run")
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
    named = (data.get("baseline") or {}) if isinstance(data, dict) else {}
    if named:                                   # refused before anything is imported
        taken = baselines.find(store, baselines.valid_name(str(named.get("name"))))
        if taken and not args.replace:
            raise UserError(f"{args.file} is baseline {taken.name}, a name that is run "
                            f"{taken.run_id} here: pass --replace, or rm it first")
    run_id = store.import_run(data)
    said = f"imported {args.file} as run {run_id} ({len(data['results'])} results"
    if named:
        baselines.save(store, named["name"], run_id, replace=True, note=named.get("note"))
        said += f", {len(data.get('samples') or [])} samples; baseline {named['name']}"
    out.print(said + ")")
    return 0
