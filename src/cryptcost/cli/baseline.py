"""``cryptcost baseline save|list|show|rm|export``: named baselines, the runs a later run is
checked against (``cryptcost check --against NAME``)."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.table import Table

from cryptcost.cli.common import open_store, out, print_json
from cryptcost.errors import UserError
from cryptcost.report.export import dumps
from cryptcost.store.exchange import run_dict
from cryptcost.store import baselines


def add_parser(sub, common) -> None:
    p = sub.add_parser("baseline", parents=[common],
                       help="named baselines: save a run under a name, list, show, remove, "
                            "export")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    save = verbs.add_parser("save", parents=[common], help="name a run (default: the latest)")
    save.add_argument("name", metavar="NAME")
    save.add_argument("run_id", metavar="RUN", nargs="?", default="latest")
    save.add_argument("--replace", action="store_true",
                      help="point a name already taken at this run")
    save.add_argument("--note", help="a line saying what the baseline is (an image, a kernel)")
    save.set_defaults(func=run_save)
    listing = verbs.add_parser("list", parents=[common], help="every baseline")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=run_list)
    show = verbs.add_parser("show", parents=[common], help="one baseline and its run")
    show.add_argument("name", metavar="NAME")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=run_show)
    rm = verbs.add_parser("rm", parents=[common], help="remove a name (its run stays)")
    rm.add_argument("name", metavar="NAME")
    rm.set_defaults(func=run_rm)
    export = verbs.add_parser("export", parents=[common],
                              help="the baseline's run, samples and name as JSON, for "
                                   "cryptcost import on another store")
    export.add_argument("name", metavar="NAME")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE, not stdout")
    export.set_defaults(func=run_export)


def run_save(args) -> int:
    store = open_store(args, create=False)
    run = store.run(args.run_id)
    if run.status not in ("complete",):
        raise UserError(f"run {run.id} is {run.status}: a baseline is a complete run")
    saved = baselines.save(store, args.name, run.id, replace=args.replace, note=args.note)
    out.print(f"baseline {saved.name} is run {run.id} ({run.command}, {run.started}, "
              f"{store.counts(run.id)[0]} results)")
    return 0


def run_list(args) -> int:
    store = open_store(args, create=False)
    every = baselines.every(store)
    if args.json:
        print_json([_described(store, b) for b in every])
        return 0
    if not every:
        out.print(f"no baseline in {store.path}: cryptcost baseline save NAME [RUN]")
        return 0
    t = Table(title=f"Baselines in {store.path}", title_justify="left")
    for col in ("name", "run", "saved", "run started", "host", "results", "note"):
        t.add_column(col)
    for b in every:
        d = _described(store, b)
        t.add_row(b.name, str(b.run_id), b.saved, d["started"], d["host"], str(d["results"]),
                  b.note or "")
    out.print(t)
    return 0


def run_show(args) -> int:
    store = open_store(args, create=False)
    d = _described(store, baselines.get(store, args.name))
    if args.json:
        print_json(d)
        return 0
    out.print(f"baseline {d['name']}: run {d['run']} ({d['command']}, {d['status']}), started "
              f"{d['started']} on {d['host']} ({d['cpu']}, kernel {d['kernel']}); saved "
              f"{d['saved']}; {d['results']} results" + (f"; {d['note']}" if d["note"] else ""))
    return 0


def run_rm(args) -> int:
    store = open_store(args, create=False)
    gone = baselines.remove(store, args.name)
    out.print(f"removed baseline {gone.name} (run {gone.run_id} stays in the store)")
    return 0


def run_export(args) -> int:
    store = open_store(args, create=False)
    base = baselines.get(store, args.name)
    run = store.run(base.run_id)
    data = {**run_dict(run, store.results(run.id)), "samples": store.samples(run.id),
            "baseline": {"name": base.name, "saved": base.saved, "note": base.note}}
    text = dumps(data)
    if args.output:
        try:
            Path(args.output).write_text(text)
        except OSError as exc:
            raise UserError(f"cannot write {args.output}: {exc.strerror}") from None
        out.print(f"baseline {base.name} (run {run.id}) written to {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def _described(store, b: baselines.Baseline) -> dict:
    run = store.run(b.run_id)
    return {**b.to_dict(), "command": run.command, "status": run.status,
            "started": run.started, "host": run.host.get("hostname", "?"),
            "cpu": (run.host.get("cpu") or {}).get("model", "?"),
            "kernel": (run.host.get("kernel") or {}).get("release", "?"),
            "emulated": bool(run.host.get("emulated")), "results": store.counts(run.id)[0]}
