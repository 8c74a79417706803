"""``cryptcost storage``: storage stacks × workloads on a medium."""

from __future__ import annotations

from cryptcost.cli.ciphers import add_policy_options, policy_from
from cryptcost.cli.common import (add_host_options, ConsoleProgress, add_cpus_option,
                                  add_profile_option, cpu_counts, parse_accel, parse_list,
                                  per_cpu_count, print_outcome, probe_host, recorded_run)
from cryptcost.engines import perf
from cryptcost.media import parse_medium
from cryptcost.units import parse_size
from cryptcost.report.terminal import storage_table
from cryptcost.runner.storage import (MAX_SAMPLE_MINIMUM, MIN_SAMPLE_MINIMUM, MIN_SAMPLE_SECONDS,
                                      StoragePlan, run_storage, validate)
from cryptcost.stacks.fs import FILESYSTEMS
from cryptcost.workloads.storage import SETS, WORKLOADS, expand


def add_parser(sub, common) -> None:
    p = sub.add_parser("storage", parents=[common], help="storage stacks against their baselines")
    add_options(p)
    add_policy_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object with a results list")
    add_host_options(p)
    p.set_defaults(func=run)


def add_options(p) -> None:
    p.add_argument("--stacks", default="all", metavar="LIST",
                   help="stacks, e.g. plain,fscrypt,gocryptfs:xchacha, or all (default: "
                        "all available)")
    p.add_argument("--medium", default="ram",
                   help="ram (default), dir:PATH, device:/dev/X, or throttled:RATE (RAM behind a "
                        "throttle of RATE, e.g. 200MB/s: checks the cost model)")
    p.add_argument("--destroy-data-on", metavar="DEVICE", help="confirm that DEVICE may be wiped")
    p.add_argument("--force", action="store_true",
                   help="use a device that carries a filesystem signature (never a mounted one)")
    p.add_argument("--workloads", default="quick", metavar="LIST",
                   help=f"{', '.join(WORKLOADS)} or a set: {', '.join(SETS)} (default: quick)")
    p.add_argument("--size", default=None,
                   help="medium size per stack instance (default: chosen from "
                   "free memory or space, 128M … 512M)")
    p.add_argument("--fs", default="ext4", choices=FILESYSTEMS, help="filesystem (default: ext4)")
    p.add_argument("--accel", default="on",
                   help="on (default), or on,off: each measured stack also with "
                   "its crypto library's hardware acceleration off, verified by the speed drop")
    p.add_argument("--sample-minimum", type=float, default=MIN_SAMPLE_SECONDS, metavar="SECONDS",
                   help=f"each sample's measured time at least (default {MIN_SAMPLE_SECONDS:g}; "
                        f"{MIN_SAMPLE_MINIMUM:g}–{MAX_SAMPLE_MINIMUM:g})")
    add_cpus_option(p)
    add_profile_option(p)


def plan_from(args) -> StoragePlan:
    workloads = parse_list(args.workloads, "workload")
    expand(workloads)
    size = parse_size(args.size, "--size") if args.size else None
    if size is not None and size < 64 << 20:
        from cryptcost.errors import UserError
        raise UserError(f"--size {args.size} is too small: at least 64M")
    medium = parse_medium(args.medium, destroy=args.destroy_data_on, force=args.force)
    return StoragePlan(stacks=tuple(parse_list(args.stacks, "stack")), medium=medium,
                       workloads=tuple(workloads),
                       size=size, fs=args.fs, accel=tuple(parse_accel(args.accel)),
                       sample_minimum=getattr(args, "sample_minimum", MIN_SAMPLE_SECONDS),
                       profile=perf.wanted(getattr(args, "profile", None),
                                                    getattr(args, "warmup", 1))[0])


def measure(args, sink, plan: StoragePlan | None = None):
    plan = plan or plan_from(args)
    policy = policy_from(args)
    return per_cpu_count(plan, cpu_counts(args), lambda p, res: run_storage(
        p, policy, res=res, sink=sink, progress=ConsoleProgress()))


def run(args) -> int:
    plan = plan_from(args)
    policy_from(args)
    counts = cpu_counts(args)
    plan, resolved, skipped = validate(plan)  # refuse bad input before a run is recorded
    from cryptcost.cli.common import err
    from cryptcost.runner.storage import describe_plan
    for line in describe_plan(plan, resolved, skipped):
        err.print(line)
    if why := perf.wanted(args.profile, args.warmup)[1]:
        err.print(f"• {why}")
    if counts != [None]:
        err.print(f"CPU counts: {', '.join(map(str, counts))}: one whole pass each")
    host = probe_host()
    with recorded_run(args, "storage", host) as (store, run_id, sink):
        outcome = measure(args, sink, plan)
    return print_outcome(args, store, run_id, outcome, storage_table, cache_mode=outcome.cache_mode)
