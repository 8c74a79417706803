"""``cryptcost compare RUN_A RUN_B``: two runs (or hosts) side by side."""

from __future__ import annotations

from rich.table import Table

from cryptcost.cli.common import open_store, out, print_json
from cryptcost.errors import UserError
from cryptcost.report.compare import compare_runs, environment_diff
from cryptcost.units import rate


def add_parser(sub, common) -> None:
    p = sub.add_parser("compare", parents=[common], help="compare two runs or hosts, with significance")
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    store = open_store(args, create=False)
    a, b = store.run(args.run_a), store.run(args.run_b)
    if bool(a.host.get("emulated")) != bool(b.host.get("emulated")):
        emu, real = (a, b) if a.host.get("emulated") else (b, a)
        raise UserError(f"run {emu.id} was measured in an emulated guest (cryptcost vm) and run {real.id} "
                        "on real hardware: their speeds cannot be compared")
    rows = compare_runs(store.results(a.id), store.results(b.id))
    env = environment_diff(a.host, b.host)
    if args.json:
        print_json({"a": a.id, "b": b.id, "results": rows, "environment": env})
        return 0
    out.print(f"run {b.id} ({b.host.get('hostname')}, {b.started}) against run {a.id} "
              f"({a.host.get('hostname')}, {a.started})")
    t = Table(title="Results in both runs", title_justify="left")
    for col in ("result", f"run {a.id}", f"run {b.id}", "B/A", "verdict"):
        t.add_column(col)
    for r in rows:
        shown = (lambda v: rate(v)) if r["unit"] == "bytes/s" else (lambda v: f"{v:,.0f} op/s")
        t.add_row(r["result"], shown(r["a"]), shown(r["b"]), f"{r['ratio']:.3f}", r["verdict"])
    out.print(t)
    if not rows:
        out.print("the two runs have no result in common")
    if env:
        e = Table(title="Environment differences", title_justify="left")
        for col in ("what", f"run {a.id}", f"run {b.id}"):
            e.add_column(col)
        for d in env:
            e.add_row(d["what"], str(d["a"]), str(d["b"]))
        out.print(e)
    else:
        out.print("same host environment (CPU, flags, kernel, drivers, tool versions)")
    return 0
