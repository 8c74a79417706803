"""``cryptcost check --against NAME [RUN]``: the regression gate. Exit 1 when a shared cell is
significantly slower, or costs significantly more CPU per byte, by more than the threshold
(a change the host's own move could make alone fails only with ``--strict``); 0 otherwise;
2 on bad input (an unknown name, runs that share no cell)."""

from __future__ import annotations



from cryptcost.cli.common import open_store, out
from cryptcost.errors import UserError
from cryptcost.report import gateout
from cryptcost.report.gate import Gate, Threshold, judge, parse_threshold
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
    return gateout.show(judged(store, args.against, args.run_id,
                               parse_threshold(args.threshold), args.strict),
                        out, "json" if args.json else args.format, args.gate_output)


def judged(store, name: str, run_id, threshold: Threshold, strict: bool = False) -> Gate:
    """Run ``run_id`` against baseline ``name`` at ``threshold`` (``--strict``: every result
    must meet it), one-line UserErrors for bad input."""
    base = baselines.get(store, name)
    a, b = store.run(base.run_id), store.run(run_id)
    if a.id == b.id:
        raise UserError(f"run {b.id} is baseline {name} itself: check a later run against it")
    if bool(a.host.get("emulated")) != bool(b.host.get("emulated")):
        raise UserError(f"baseline {name} (run {a.id}) and run {b.id}: one was measured in an "
                        "emulated guest (cryptcost vm), the other on real hardware; their "
                        "speeds cannot be compared")
    return judge(store.results(a.id), store.results(b.id), a.host, b.host, baseline=name,
                 run_ids=(a.id, b.id), threshold=threshold, strict=strict,
                 samples_a=store.samples(a.id), samples_b=store.samples(b.id))
