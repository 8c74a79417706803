"""``cryptcost check --against NAME [RUN]``: the regression gate. Exit 1 when a shared cell is
significantly slower, or costs significantly more CPU per byte, by more than the threshold
(a change the host's own move could make alone fails only with ``--strict``); 0 otherwise;
2 on bad input (an unknown name, runs that share no cell)."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.table import Table

from cryptcost.cli.common import open_store, out
from cryptcost.errors import UserError
from cryptcost.report import gateout
from cryptcost.report.gate import Gate, host_said, judge, parse_threshold
from cryptcost.store import baselines


def add_parser(sub, common) -> None:
    p = sub.add_parser("check", parents=[common],
                       help="the regression gate: a run against a named baseline, exit 1 on a "
                            "significant slowdown beyond the threshold")
    p.add_argument("--against", required=True, metavar="NAME",
                   help="the baseline to check against (cryptcost baseline save NAME)")
    p.add_argument("run_id", metavar="RUN", nargs="?", default="latest",
                   help="the run to check (default: the latest)")
    add_gate_options(p)
    p.add_argument("--json", action="store_true", help="the verdict as JSON (--format json)")
    p.set_defaults(func=run)


def add_gate_options(p) -> None:
    """The options ``check`` and ``run --against`` share."""
    p.add_argument("--threshold", default="5%", metavar="PCT",
                   help="how much slower (or more CPU per byte) a significant change must be "
                        "to fail: 5%% (default), or per kind: 5%%,storage=10%%,network=8%%")
    p.add_argument("--strict", action="store_true",
                   help="fail a change that the host's own move between the runs (its CPU, its "
                        "memory bandwidth) could make alone, too")
    p.add_argument("--format", choices=gateout.FORMATS, default="table",
                   help="table (default), md (a CI job summary), junit (a test report), "
                        "bencher (Bencher Metric Format), json")
    p.add_argument("--gate-output", "-O", metavar="FILE",
                   help="write that format to FILE (Markdown for table), and the table to the "
                        "terminal")


def run(args) -> int:
    store = open_store(args, create=False)
    return gate(store, args.against, args.run_id, args,
                fmt="json" if args.json else args.format)


def judged(store, name: str, run_id, args) -> Gate:
    """Run ``run_id`` against baseline ``name`` (one-line UserErrors for bad input)."""
    threshold = parse_threshold(args.threshold)
    base = baselines.get(store, name)
    a, b = store.run(base.run_id), store.run(run_id)
    if a.id == b.id:
        raise UserError(f"run {b.id} is baseline {name} itself: check a later run against it")
    if bool(a.host.get("emulated")) != bool(b.host.get("emulated")):
        raise UserError(f"baseline {name} (run {a.id}) and run {b.id}: one was measured in an "
                        "emulated guest (cryptcost vm), the other on real hardware; their "
                        "speeds cannot be compared")
    return judge(store.results(a.id), store.results(b.id), a.host, b.host, baseline=name,
                 run_ids=(a.id, b.id), threshold=threshold, strict=args.strict,
                 samples_a=store.samples(a.id), samples_b=store.samples(b.id))


def gate(store, name: str, run_id, args, fmt: str = "table") -> int:
    """The gate's verdict printed (and written with ``--gate-output``); its exit status."""
    return show(judged(store, name, run_id, args), args, fmt)


def show(verdict: Gate, args, fmt: str | None = None) -> int:
    """Print (and with ``--gate-output`` write) a verdict; its exit status."""
    fmt = fmt or args.format
    target = getattr(args, "gate_output", None)
    if target:
        try:
            Path(target).write_text(render(verdict, "md" if fmt == "table" else fmt))
        except OSError as exc:
            raise UserError(f"cannot write {target}: {exc.strerror}") from None
    if fmt == "table" or target:
        print_table(verdict)
    else:
        sys.stdout.write(render(verdict, fmt))
    return verdict.exit_code


def render(verdict: Gate, fmt: str) -> str:
    if fmt == "md":
        return gateout.to_markdown(verdict)
    if fmt == "junit":
        return gateout.to_junit(verdict)
    if fmt == "bencher":
        return gateout.to_bencher(verdict)
    return gateout.to_json(verdict)


def print_table(verdict: Gate) -> None:
    t = Table(title=f"Run {verdict.run_b} against baseline {verdict.baseline} "
                    f"(run {verdict.run_a})", title_justify="left")
    for col in ("cell", "figure", "baseline", "this run", "change (95 % interval)", "verdict"):
        t.add_column(col)
    for c in verdict.cells:
        for j in c.figures:
            t.add_row(c.label, j.figure, gateout.figure(j.a, j.unit), gateout.figure(j.b, j.unit),
                      gateout.change(j), gateout.MARK[j.status].replace("**", ""))
    out.print(t)
    out.print(f"{gateout.counts(verdict)}; {host_said(verdict)}")
    for c in verdict.regressions:
        out.print(f"regression: {c.label}: {gateout.why(c, verdict)}")
    for c in verdict.cells:
        if c.status == "host" and not verdict.strict:
            out.print(f"not failed, the host's move: {c.label}: {gateout.why(c, verdict)}")
    out.print(gateout.headline(verdict))
