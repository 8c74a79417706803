"""``cryptcost network``: network stacks × workloads on a link, each against plain TCP."""

from __future__ import annotations

from cryptcost.cli.ciphers import add_policy_options, policy_from
from cryptcost.cli.common import (add_host_options, ConsoleProgress, add_cpus_option,
                                  add_peer_options, peer_options,
                                  add_profile_option, cpu_counts, err, parse_accel, parse_ints,
                                  parse_list,
                                  per_cpu_count, print_outcome, probe_host, recorded_run)
from cryptcost.engines import perf
from cryptcost.links import LINKS
from cryptcost.report.terminal import network_table
from cryptcost.runner.network import NetworkPlan, describe_plan, run_network, validate
from cryptcost.units import parse_size
from cryptcost.workloads.network import SETS, WORKLOADS


def add_parser(sub, common) -> None:
    p = sub.add_parser("network", parents=[common],
                       help="network stacks against plain TCP on the same link")
    p.add_argument("--stacks", default="all", metavar="LIST",
                   help="stacks, e.g. tls,ssh:chacha20-poly1305,wireguard, or all (default: "
                        "all available)")
    p.add_argument("--link", default="netns",
                   help=f"{', '.join(LINKS)} or peer:HOST (default: netns, two namespaces "
                   "joined by veth; peer:HOST: this host to HOST, reached with ssh, where "
                   "cryptcost runs as a worker)")
    add_peer_options(p)
    p.add_argument("--mtu", type=int, default=1500,
                   help="the link's MTU (default: 1500; 9000 for jumbo frames)")
    p.add_argument("--delay", type=float, default=0.0, metavar="MS",
                   help="milliseconds added to every round trip on a netns link, half each way "
                        "(netem; default: 0): a WAN's latency, on both the stacks and their "
                        "baseline")
    p.add_argument("--streams", type=int, default=4,
                   help="parallel streams of the 'streams' workload (default: 4)")
    p.add_argument("--clients", default="1,2,4,8", metavar="LIST",
                   help="dbench clients of the 'dbench' workload, one cell each (default: "
                        "1,2,4,8, as R4)")
    p.add_argument("--workloads", default="quick", metavar="LIST",
                   help=f"{', '.join(WORKLOADS)} or a set: {', '.join(SETS)} (default: quick)")
    p.add_argument("--seconds", type=int, default=2,
                   help="seconds per stream sample (default: 2)")
    p.add_argument("--accel", default="on",
                   help="on (default), or on,off: each measured stack also with "
                   "its crypto library's hardware acceleration off, verified by the speed drop")
    p.add_argument("--file-size", default="256M",
                   help="size of the file-share workloads' large file "
                   "(default: 256M)")
    add_cpus_option(p)
    add_profile_option(p)
    add_policy_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object with a results list")
    add_host_options(p)
    p.set_defaults(func=run)


def plan_from(args) -> NetworkPlan:
    from cryptcost.errors import UserError
    size = parse_size(args.file_size, "--file-size")
    if not 1 << 20 <= size <= 8 << 30:
        raise UserError(f"--file-size {args.file_size}: use 1M … 8G")
    return NetworkPlan(stacks=tuple(parse_list(args.stacks, "stack")), link=args.link, mtu=args.mtu,
                       clients=tuple(parse_ints(args.clients, "--clients")),
                       delay_ms=args.delay,
                       workloads=tuple(parse_list(args.workloads, "workload")),
                       streams=args.streams,
                       seconds=args.seconds, file_bytes=size, accel=tuple(parse_accel(args.accel)),
                       profile=perf.wanted(args.profile, args.warmup)[0], peer=peer_options(args))


def run(args) -> int:
    plan = plan_from(args)
    policy = policy_from(args)
    counts = cpu_counts(args)
    resolved, skipped = validate(plan)          # refuse bad input before a run is recorded
    for line in describe_plan(plan, resolved, skipped):
        err.print(line)
    if why := perf.wanted(args.profile, args.warmup)[1]:
        err.print(f"• {why}")
    if counts != [None]:
        err.print(f"CPU counts: {', '.join(map(str, counts))}: one whole pass each")
    host = probe_host()
    with recorded_run(args, "network", host) as (store, run_id, sink):
        outcome = per_cpu_count(plan, counts, lambda p, res: run_network(
            p, policy, res=res, sink=sink, progress=ConsoleProgress()))
    return print_outcome(args, store, run_id, outcome, network_table, link=plan.link, mtu=plan.mtu)
