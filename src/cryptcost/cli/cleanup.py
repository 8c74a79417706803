"""``cryptcost cleanup``: release what a killed run left behind."""

from __future__ import annotations

from cryptcost.cli.common import out, print_json
from cryptcost.lifecycle.journal import state_dir
from cryptcost.lifecycle.release import cleanup


def add_parser(sub, common) -> None:
    p = sub.add_parser("cleanup", parents=[common],
                       help="release mounts, loops, daemons and keys a killed run left behind")
    p.add_argument("--force", action="store_true",
                   help="also release resources of runs still alive")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    import cryptcost.links                        # registers the links' releasers (netns)
    import cryptcost.links.peer                   # … a peer link's session
    import cryptcost.stacks                       # … and every stack's
    cryptcost.stacks.registry()
    report = cleanup(force=args.force)
    if args.json:
        print_json({"state_dir": str(state_dir()), "actions": report})
    elif not report:
        out.print(f"nothing to clean up (journals in {state_dir()})")
    else:
        for line in report:
            out.print(line)
    return 1 if any(line.startswith("FAILED") for line in report) else 0
