"""``cryptcost ciphers``: raw cipher throughput table."""

from __future__ import annotations

from cryptcost import stats
from cryptcost.cli.common import (add_host_options, ConsoleProgress, probe_host, parse_accel,
                                  parse_ints, parse_list,
                                  print_outcome, recorded_run)
from cryptcost.engines import CIPHER_ENGINES
from cryptcost.units import parse_size
from cryptcost.report.terminal import cipher_table
from cryptcost.engines.base import ALL_SIZES
from cryptcost.runner.ciphers import CipherPlan, run_ciphers
from cryptcost.runner.ciphers.executor import RealExecutor


def add_parser(sub, common) -> None:
    p = sub.add_parser("ciphers", parents=[common], help="raw cipher throughput per engine")
    add_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object with a results list")
    add_host_options(p)
    p.set_defaults(func=run)


def add_options(p) -> None:
    """Cipher-matrix options, shared with ``run``."""
    p.add_argument("--engine", default=None, metavar="LIST",
                   help=f"engines to use (default: all available: {','.join(CIPHER_ENGINES)})")
    p.add_argument("--algo", default=None, metavar="LIST",
                   help="algorithms, e.g. aes-256-xts,aes-128-gcm (default: every algorithm of "
                        "each engine)")
    p.add_argument("--sizes", default="4096", metavar="LIST",
                   help="buffer sizes, e.g. 512,4K,1M or 'all' for "
                        f"{','.join(str(s) for s in ALL_SIZES)} (default: 4096)")
    p.add_argument("--threads", default="1", metavar="LIST",
                   help="thread counts, e.g. 1,2 (default: 1)")
    p.add_argument("--accel", default="on", metavar="on,off",
                   help="hardware acceleration (default: on)")
    p.add_argument("--seconds", type=int, default=1, help="seconds per sample (default: 1)")
    add_policy_options(p)


def add_policy_options(p) -> None:
    p.add_argument("--min-samples", type=int, default=3, help="samples at least (default: 3)")
    p.add_argument("--max-samples", type=int, default=10, help="samples at most (default: 10)")
    p.add_argument("--ci-target", type=float, default=3.0, metavar="PCT",
                   help="stop when the 95 %% CI half-width is within PCT %% of the mean "
                        "(default: 3)")
    p.add_argument("--warmup", type=int, default=1, help="discarded runs per series (default: 1)")


def policy_from(args) -> stats.Policy:
    from cryptcost.errors import UserError
    if args.min_samples < 1 or args.max_samples < args.min_samples or args.max_samples > 1000:
        raise UserError("need 1 <= --min-samples <= --max-samples <= 1000")
    if not 0 < args.ci_target < 100:
        raise UserError("--ci-target is a percentage between 0 and 100")
    if not 0 <= args.warmup <= 100:
        raise UserError("--warmup must be 0 … 100")
    return stats.Policy(args.min_samples, args.max_samples, args.ci_target / 100, args.warmup)


def plan_from(args) -> CipherPlan:
    sizes = ALL_SIZES if args.sizes == "all" else tuple(
        parse_size(s, "buffer size") for s in parse_list(args.sizes, "size"))
    return CipherPlan(
        engines=tuple(parse_list(args.engine, "engine")) if args.engine else tuple(CIPHER_ENGINES),
        algorithms=tuple(parse_list(args.algo, "algorithm")) if args.algo else None,
        sizes=sizes, threads=tuple(parse_ints(args.threads, "threads")),
        accel=tuple(dict.fromkeys(parse_accel(args.accel))), seconds=args.seconds,
        engines_explicit=bool(args.engine))


def measure(args, host: dict, sink):
    """Run the cipher matrix the args describe; return the outcome."""
    plan = plan_from(args)
    plan.validate()
    return run_ciphers(plan, RealExecutor(), policy_from(args), sink=sink,
                       progress=ConsoleProgress(), cpu_flags=host["cpu"]["flags"])


def run(args) -> int:
    plan_from(args).validate()          # bad input fails before anything is recorded
    policy_from(args)
    host = probe_host()
    with recorded_run(args, "ciphers", host) as (store, run_id, sink):
        outcome = measure(args, host, sink)
    return print_outcome(args, store, run_id, outcome, cipher_table)
