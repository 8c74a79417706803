"""``cryptcost compare RUN_A RUN_B``: two runs (or hosts) side by side."""

from __future__ import annotations

from rich.table import Table

from cryptcost.cli.common import open_store, out, print_json
from cryptcost.errors import UserError
from cryptcost.report.compare import MOVE_CELLS, STILL, compare_runs, environment_diff, host_move
from cryptcost.units import rate


def add_parser(sub, common) -> None:
    p = sub.add_parser("compare", parents=[common],
                       help="compare two runs or hosts (or each of several against the first), "
                            "with significance")
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B", nargs="+",
                   help="one run, or several (e.g. a fleet's hosts): each against RUN_A")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def move_text(move: dict | None, marked: int) -> str:
    """What the host's own move between the runs means for the verdicts."""
    note = ("each verdict's interval sees only the noise inside its own run, not a move of the "
            "whole host between the runs")
    if not move:
        return (f"the host's move between the runs is unknown (fewer than {MOVE_CELLS} OpenSSL "
                f"cipher cells in both): {note}")
    span = (f"median over {move['cells']} OpenSSL cells, {(move['low'] - 1) * 100:+.1f} … "
            f"{(move['high'] - 1) * 100:+.1f} %")
    if abs(move["ratio"] - 1) <= STILL:
        return (f"the host's CPU held still between the runs ({(move['ratio'] - 1) * 100:+.1f} %, "
                f"{span}); the host's memory and I/O can still move between runs unseen by this, "
                "and by each verdict's interval, which sees only the noise inside its own run")
    return (f"the host's CPU moved {(move['ratio'] - 1) * 100:+.1f} % between the runs ({span}, "
            f"which depend on nothing but the CPU): {note}. {marked} significant difference(s) lie "
            "within that move (≈ host): the host alone could have made them; rerun both on a "
            "quiet host before reading them as the change's")


def run(args) -> int:
    store = open_store(args, create=False)
    a = store.run(args.run_a)
    others = [store.run(b) for b in args.run_b]
    for b in others:
        _comparable(a, b)
    got = [_compare(store, a, b, args.json) for b in others]
    if args.json:
        print_json(got[0] if len(got) == 1 else got)
    return 0


def _comparable(a, b) -> None:
    if bool(a.host.get("emulated")) != bool(b.host.get("emulated")):
        emu, real = (a, b) if a.host.get("emulated") else (b, a)
        raise UserError(f"run {emu.id} was measured in an emulated guest (cryptcost vm) and run "
                        f"{real.id} on real hardware: their speeds cannot be compared")


def _compare(store, a, b, quiet: bool) -> dict:
    """Run ``b`` against run ``a``: printed unless ``quiet``; returned as plain data."""
    results_a, results_b = store.results(a.id), store.results(b.id)
    move = host_move(results_a, results_b)
    rows = compare_runs(results_a, results_b, move)
    env = environment_diff(a.host, b.host)
    got = {"a": a.id, "b": b.id, "results": rows, "host_move": move, "environment": env}
    if quiet:
        return got
    out.print(f"run {b.id} ({b.host.get('hostname')}, {b.started}) against run {a.id} "
              f"({a.host.get('hostname')}, {a.started})")
    t = Table(title="Results in both runs", title_justify="left")
    for col in ("result", f"run {a.id}", f"run {b.id}", "B/A", "verdict"):
        t.add_column(col)
    for r in rows:
        shown = (lambda v: rate(v)) if r["unit"] == "bytes/s" else (lambda v: f"{v:,.0f} op/s")
        t.add_row(r["result"], shown(r["a"]), shown(r["b"]), f"{r['ratio']:.3f}",
                  r["verdict"] + (" ≈ host" if r["host_could"] else ""))
    out.print(t)
    if not rows:
        out.print("the two runs have no result in common")
    out.print(move_text(move, sum(r["host_could"] for r in rows)))
    if env:
        e = Table(title="Environment differences", title_justify="left")
        for col in ("what", f"run {a.id}", f"run {b.id}"):
            e.add_column(col)
        for d in env:
            e.add_row(d["what"], str(d["a"]), str(d["b"]))
        out.print(e)
    else:
        out.print("same host environment (CPU, flags, kernel, drivers, tool versions)")
    return got
