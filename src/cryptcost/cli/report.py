"""``cryptcost report [RUN] --format …``: a stored run as a table, Markdown,
HTML (charts), JSON or CSV. Every format is rebuilt from the store."""

from __future__ import annotations

from cryptcost.cli.common import linked_results, open_store, out, write_output
from cryptcost import units
from cryptcost.errors import UserError
from cryptcost.report import document
from cryptcost.record import read
from cryptcost.report.fleet import Member, build
from cryptcost.report.render import FORMATS, render, render_fleet
from cryptcost.report.terminal import fleet_tables, summary_tables


def add_parser(sub, common) -> None:
    p = sub.add_parser("report", parents=[common],
                       help="a run as a table, Markdown, HTML, JSON or CSV")
    p.add_argument("run_ids", nargs="*", metavar="RUN",
                   help="run id (default: latest); several: a fleet report, the runs side by "
                        "side (e.g. each host's run of a fleet)")
    p.add_argument("--format", default="terminal", choices=FORMATS)
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--device-speed", metavar="RATE",
                   help="cost model: predict on a device, e.g. 3GB/s")
    p.add_argument("--link", metavar="LINK", help="cost model: predict over a link, e.g. 1GbE")
    p.add_argument("--details", action="store_true",
                   help="the terminal format: every result, the cost split, the findings and "
                        "the recommendations in full before the answer (without it: the answer "
                        "alone, one screen)")
    p.set_defaults(func=run)


def run(args) -> int:
    model = {"device_speed": args.device_speed} if args.device_speed else \
        {"link": args.link} if args.link else None
    if model:
        units.target_of(model)
    store = open_store(args, create=False)
    if len(args.run_ids) > 1:
        if model:
            raise UserError("report: --device-speed and --link model one run, not a fleet")
        return _fleet(args, members(store, args.run_ids))
    run_ = store.run(args.run_ids[0] if args.run_ids else "latest")
    results = store.results(run_.id)
    guests = linked_results(store, run_)
    if args.format == "terminal":
        for table in summary_tables(document.build(run_, results, model, guests=guests),
                                    width=out.width, details=args.details):
            out.print(table)
        return 0
    write_output(args.output, render(args.format, run_, results, model, guests=guests))
    return 0


def members(store, run_ids: list, labels: list[str] | None = None) -> list[Member]:
    """Stored runs as the columns of a fleet report, each labelled with ``labels`` or its host
    (``A→B`` for a run of the network across a peer link), made unique by its run id."""
    got: list[Member] = []
    for i, rid in enumerate(run_ids):
        run_ = store.run(str(rid))
        results = store.results(run_.id)
        typed = read(results)
        peers = sorted({r.cell.peer for r in typed if r.cell.peer})
        pair = bool(peers) and all(r.kind == "network" for r in typed)
        label = (labels[i] if labels else
                 f"{run_.host.get('hostname')}→{peers[0]}" if pair else
                 str(run_.host.get("hostname")))
        if any(m.label == label for m in got):
            label += f" (run {run_.id})"
        got.append(Member(label, run_, results, pair))
    return got


def _fleet(args, fleet_members: list[Member]) -> int:
    if args.format == "terminal":
        for table in fleet_tables(build(fleet_members)):
            out.print(table)
        return 0
    write_output(args.output, render_fleet(args.format, fleet_members))
    return 0
