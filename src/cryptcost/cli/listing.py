"""``cryptcost list`` and ``cryptcost show RUN``: browse the result store."""

from __future__ import annotations

from rich.table import Table

from cryptcost.cli.common import open_store, out, print_json
from cryptcost.store.exchange import run_dict


def add_parser(sub, common) -> None:
    p = sub.add_parser("list", parents=[common], help="list the runs in the result store")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=list_runs)
    p = sub.add_parser("show", parents=[common], help="show one run's results")
    p.add_argument("run_id", metavar="RUN", help="run id, or 'latest'")
    p.add_argument("--json", action="store_true")
    p.add_argument("--samples", action="store_true", help="include every sample (with --json)")
    p.set_defaults(func=show_run)


def list_runs(args) -> int:
    store = open_store(args, create=False)
    runs = store.runs()
    if args.json:
        print_json([{"id": r.id, "started": r.started, "finished": r.finished, "command": r.command,
                     "status": r.status, "host": r.host.get("hostname"),
                     "emulated": bool(r.host.get("emulated")), "suite": r.extra.get("suite"),
                     "results": store.counts(r.id)[0]} for r in runs])
        return 0
    table = Table(title=f"Runs in {store.path}", title_justify="left")
    for col in ("id", "started", "command", "status", "host", "results", "samples"):
        table.add_column(col)
    for r in runs:
        n_res, n_smp = store.counts(r.id)
        table.add_row(str(r.id), r.started, r.command, r.status, r.host.get("hostname", "?")
                      + (" (emulated)" if r.host.get("emulated") else ""), str(n_res), str(n_smp))
    out.print(table)
    return 0


def show_run(args) -> int:
    store = open_store(args, create=False)
    run = store.run(args.run_id)
    results = store.results(run.id)
    if args.json:
        obj = run_dict(run, results)
        if args.samples:
            obj["samples"] = store.samples(run.id)
        print_json(obj)
        return 0
    from cryptcost.report.terminal import result_tables
    out.print(f"run {run.id}: {run.command}, {run.status}, started {run.started} "
              f"on {run.host.get('hostname', '?')} ({run.host.get('cpu', {}).get('model', '?')})")
    if run.host.get("emulated"):
        out.print(f"emulated: {run.host['emulated'].get('why', '')}")
    for table in result_tables(results):
        out.print(table)
    if not results:
        n = store.counts(run.id)[1]
        out.print(f"no results stored; {n} samples (cryptcost show {run.id} --json --samples)")
    return 0
