"""``cryptcost install``: the Debian packages a need asks for, with no service started or left
enabled (``make run`` installs ``run``, ``make test`` installs ``tests``)."""

from __future__ import annotations

import time

from cryptcost import units
from cryptcost.cli.common import err, print_json
from cryptcost.errors import UserError
from cryptcost.host import apt, kernel
from cryptcost.suite import needs


def add_parser(sub, common) -> None:
    p = sub.add_parser(
        "install", parents=[common],
        help="install what a need asks for (run, tests, guest, a suite, a stack, a program): "
             "Debian packages, no service started or left enabled")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="run (the main job: the quick suite here), tests (everything), guest "
                        "(cryptcost vm's), a suite (standard, seeds, full), a stack (smb3, nfs, "
                        "zfs …), or a program cryptcost uses (dbench …); default: run")
    p.add_argument("--plan", metavar="FILE", help="what a plan file measures here")
    p.add_argument("--dry-run", action="store_true",
                   help="say what would be installed, by need, and install nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    names = args.names or ([] if args.plan else ["run"])
    found = needs.resolve(names, plan_file=args.plan)
    main = sorted({p for n in found for p in n.packages})
    todo = apt.missing(main)
    zfs = any(n.contrib for n in found) and not needs.zfs_built()
    listed = [_listed(n, set(todo), zfs) for n in found]
    if args.json and args.dry_run:
        print_json({"needs": listed, "missing": todo, "zfs_module": zfs})
        return 0
    _say_plan(listed, main, todo, zfs)
    if args.dry_run:
        return 0
    start = time.monotonic()
    earlier = apt.mend_earlier(say=_say)
    changes = [apt.install(main, " ".join(names) or args.plan, say=_say)]
    if zfs:
        changes.append(_zfs())
    if args.json:
        print_json({"needs": listed, "earlier": earlier,
                    "installs": [c.__dict__ for c in changes if c.asked]})
        return 0
    asked = sum(len(c.asked) for c in changes)
    if asked:
        brought = sum(len(c.brought) for c in changes)
        disabled = [u for c in changes for u in c.disabled]
        _say(f"done in {units.duration(time.monotonic() - start)}: {asked} package(s) asked, "
             f"{brought} installed with what they depend on; no service started, "
             + (f"and the {len(disabled)} unit(s) the install enabled are disabled again"
                if disabled else "none enabled"))
    return 0


def _listed(need: needs.Need, todo: set[str], zfs: bool) -> dict:
    return {"name": need.name, "what": need.what, "packages": sorted(need.packages),
            "missing": sorted(need.packages & todo),
            "contrib": sorted(need.contrib) if zfs else []}


def _say(text: str) -> None:
    err.print(f"cryptcost install: {text.removeprefix('cryptcost install: ')}")


def _say_plan(listed: list[dict], main: list[str], todo: list[str], zfs: bool) -> None:
    """What will be installed, need by need, with the counts, before anything is."""
    if not todo and not zfs:
        _say(f"{', '.join(n['name'] for n in listed)}: all {len(main)} package(s) are installed")
        return
    _say(f"{len(todo)} of {len(main)} package(s) to install"
         + (", and ZFS's module to build" if zfs else "") + ":")
    for need in listed:
        missing = need["missing"] + need["contrib"]
        shown = " ".join(missing[:12]) + (" …" if len(missing) > 12 else "")
        err.print(f"  {need['name']:<10} {need['what']}: {len(need['packages'])} package(s), "
                  f"{len(missing)} to install{': ' + shown if missing else ''}")
    err.print("  (apt-get; no service is started, and none is left enabled)")


def _zfs() -> apt.Change:
    """ZFS's module for the stock kernel: zfs-dkms from Debian's contrib builds it (minutes).
    The stock kernel is asked again: the install just before may have brought it (the guest's
    need), after planning read it as missing."""
    kernel.stock_version.cache_clear()
    stock = kernel.stock_version()
    if not stock:
        raise UserError("ZFS's module is built for the stock kernel, and linux-image-amd64 is "
                        "not installed: cryptcost install guest zfs")
    _say(f"building ZFS for the kernel {stock} (zfs-dkms from Debian contrib; minutes)")
    with apt.with_contrib() as options:
        change = apt.install([*needs.ZFS, f"linux-headers-{stock}"], "zfs",
                             apt_options=options, say=_say)
    kernel.bootable_with.cache_clear()
    if stock not in kernel.bootable_with("zfs"):
        raise UserError(f"zfs-dkms built no module for {stock}: see /var/lib/dkms/zfs")
    return change
