"""What to install for what a person asked for, from the stacks' declarations: ``cryptcost
install`` and ``make``.

A *need* is a named set of Debian packages:

- ``run``: the main job, ``cryptcost run``'s quick suite on this host — the cipher engines it
  runs, every stack the quick suite measures here (the storage stacks this kernel can run, the
  quick network stacks, each with its baselines), their media and workloads, perf for the
  profile — and nothing else;
- a suite (``standard``, ``seeds``, ``full``) or a plan file: what its parts measure here;
- a stack (``smb3``, ``nfs``, ``zfs``): its tools and its baselines', asked for by name
  whatever this kernel has (the guest runs what it lacks), and the guest kernel it names;
- ``guest``: ``cryptcost vm``'s guest (Debian's stock kernel, qemu, a busybox initramfs);
- a program or a Debian package cryptcost uses (``dbench``, ``bonnie++``);
- ``tests``: every one of these, and the test suite's own tools (the browser that checks
  the report).

How each is installed (no service started, none left enabled) is :mod:`cryptcost.host.apt`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cryptcost import proc, stacks
from cryptcost.engines import CIPHER_ENGINES
from cryptcost.errors import UserError
from cryptcost.host import kernel, tools
from cryptcost.stacks.base import GUEST_MODULES, IN_STOCK_KERNEL, Stack
from cryptcost.stacks.net import NetworkStack
from cryptcost.suite.compiled import compile_plan
from cryptcost.workloads import network as netwl
from cryptcost.workloads import storage as wl
from cryptcost.workloads.plan import SUITES, load

# Before the venv exists (the Makefile's first step).
BOOTSTRAP = ("python3-venv",)
GUEST = ("linux-image-amd64", "qemu-system-x86", "busybox-static", "cpio", "kmod", "file")
# Debian 12's packages of the kernels a stack may ask the guest for (``guest_kernel``).
GUEST_KERNELS = {"6.12": "linux-image-6.12-amd64"}
# The test suite's own: the browser that checks the HTML report, sudo (a peer reached as a
# user), nm and readelf (the Go symbol test), ethtool (the offload checks).
TESTS = ("chromium", "sudo", "binutils", "ethtool")
# ZFS is an out-of-tree module: zfs-dkms builds it from Debian's contrib for the stock kernel.
ZFS = ("zfs-dkms", "zfsutils-linux")
STORAGE_TOOLS = ("losetup", "wipefs", "mkfs.ext4")
OPS = {"fio": "fio", "untar": "tar", "rsync": "rsync", "bonnie": "bonnie++", "dbench": "dbench"}
WHAT = {"run": "the main job: the quick suite on this host",
        "guest": "cryptcost vm's guest: Debian's stock kernel under qemu",
        "tests": "the test suite's own tools",
        "zfs": "ZFS's module, built by zfs-dkms from Debian contrib for the stock kernel"}


@dataclass
class Need:
    """A named set of packages, and what it is for."""

    name: str
    what: str
    packages: set[str] = field(default_factory=set)
    contrib: set[str] = field(default_factory=set)     # from Debian's contrib (ZFS's module)

    def add(self, *packages: str) -> "Need":
        self.packages |= {p for p in packages if p and " " not in p and ":" not in p}
        return self


def features() -> set[str]:
    """The kernel features this host has."""
    return {name for name, f in kernel.features().items() if f["present"]}


def _tool_packages(names) -> set[str]:
    return {tools.tool(n).package for n in names}


def stack_packages(cls: type[Stack], here: set[str] | None = None) -> set[str]:
    """A stack's packages and its baselines', all the way down; with ``here`` (this kernel's
    features), a network stack's userspace fallback only where the kernel path is missing."""
    out: set[str] = set()
    skip = set()
    if (here is not None and issubclass(cls, NetworkStack) and cls.kernel_features
            and set(cls.kernel_features) <= here):
        skip = {t.name for t in cls.userspace_tools}
    out |= {t.package for t in cls.needed_tools() if t.name not in skip}
    if cls.kind == "storage":
        out |= _tool_packages(STORAGE_TOOLS)
    if cls.guest_kernel and (here is None or not set(cls.features) <= here):
        out.add(GUEST_KERNELS.get(cls.guest_kernel, f"linux-image-{cls.guest_kernel}-amd64"))
    for spec in {*cls.baselines, *(b for v in cls.variants.values()
                                   for b in v.get("baselines", ()))}:
        base = stacks.get(spec.split(":")[0])
        if base is not cls:
            out |= stack_packages(base, here)
    return out


def _specs(specs: list[str], kind: str, here: set[str]) -> list[type[Stack]]:
    """The stack classes of a table's specs; ``all``: those this kernel can run."""
    out = []
    for spec in specs:
        if spec == "all":
            out += [c for c in stacks.of_kind(kind).values() if set(c.features) <= here]
        else:
            out += [cls for cls, _ in stacks.parse_spec(spec, kind)]
    return list(dict.fromkeys(out))


def plan_packages(suite: str | None, plan_file: str | None, here: set[str]) -> set[str]:
    """What a suite's or a plan file's parts measure with, on a host with ``here``."""
    out: set[str] = set()
    for part in compile_plan(load(suite, plan_file))[0].parts:
        if part.ciphers is not None:
            for name in part.ciphers.engines:
                engine = CIPHER_ENGINES[name]
                if name != "kernel" or "af_alg" in here:
                    out.add(tools.tool(engine.tool).package)
        for plan in part.storage:
            out |= _tool_packages(STORAGE_TOOLS + (f"mkfs.{plan.fs}",))
            out |= {t.package for t in getattr(plan.medium, "tools", ())}
            names = wl.expand(plan.workloads)
            out |= {tools.tool(OPS[op.engine]).package for op in _ops(names)}
            if plan.profile:
                out.add(tools.tool("perf").package)
            for cls in _specs(plan.stacks, "storage", here):
                out |= stack_packages(cls, here)
        for plan in part.network:
            names = netwl.expand(plan.workloads)
            if "dbench" in names:
                out.add(tools.tool("dbench").package)
            if plan.profile:
                out.add(tools.tool("perf").package)
            if plan.link.startswith("peer:"):
                out.add("openssh-client")
            for cls in _specs(plan.stacks, "network", here):
                out |= stack_packages(cls, here)
    return out


def _ops(names: list[str]):
    """Every op the named storage workloads run (at a nominal medium: only the engines count)."""
    return [op for step in wl.steps(names, wl.Sizes(medium=512 << 20), False) for op in step.ops]


def resolve(names: list[str], *, plan_file: str | None = None) -> list[Need]:
    """The needs ``names`` ask for, in order, each with its packages (``tests``: every need)."""
    here = features()
    out: dict[str, Need] = {}

    def need(name: str, what: str) -> Need:
        return out.setdefault(name, Need(name, what))

    if plan_file:
        need(Path(plan_file).name, f"the plan {plan_file} on this host").add(
            *plan_packages(None, plan_file, here))
    for name in names:
        if name == "tests":
            need("run", WHAT["run"]).add(*BOOTSTRAP, *plan_packages("quick", None, here))
            for suite in SUITES[1:]:
                need(suite, f"the {suite} suite, here and in the guest").add(
                    *plan_packages(suite, None, here | IN_STOCK_KERNEL | set(GUEST_MODULES)))
            every = need("stacks", "every stack, here or in the guest")
            for cls in stacks.registry().values():
                every.add(*stack_packages(cls))
            need("guest", WHAT["guest"]).add(*GUEST, *GUEST_KERNELS.values())
            _zfs(need("zfs", WHAT["zfs"]))
            need("programs", "every program cryptcost wraps").add(
                *(t.package for t in tools.TOOLS.values()))
            need("tests", WHAT["tests"]).add(*TESTS)
        elif name == "run":
            need("run", WHAT["run"]).add(*BOOTSTRAP, *plan_packages("quick", None, here))
        elif name == "guest":
            need("guest", WHAT["guest"]).add(*GUEST)
        elif name in SUITES:
            need(name, f"the {name} suite on this host").add(*plan_packages(name, None, here))
        elif name == "zfs":
            _zfs(need("zfs", WHAT["zfs"]))
        elif name.partition(":")[0] in stacks.registry():
            cls = stacks.get(name.partition(":")[0])
            need(cls.name, f"the {cls.name} stack").add(*stack_packages(cls, here))
        elif name in tools.TOOLS:
            need(name, f"the program {name}").add(tools.tool(name).package)
        elif name in known_packages():
            need(name, f"the Debian package {name}").add(name)
        else:
            raise UserError(f"cryptcost install: nothing named {name!r}; name run, tests, guest, "
                            f"a suite ({', '.join(SUITES)}), a stack "
                            f"({', '.join(stacks.registry())}), or a program cryptcost uses")
    return list(out.values())


def _zfs(need: Need) -> None:
    """ZFS's module for the stock kernel (which it needs), and its headers to build it with."""
    need.add("linux-image-amd64")
    need.contrib |= set(ZFS)


def zfs_built() -> bool:
    """Whether the stock kernel has ZFS's module and the zfs program is here."""
    stock = kernel.stock_version()
    return bool(stock) and proc.which("zfs") is not None and stock in kernel.bootable_with("zfs")


def known_packages() -> set[str]:
    """Every Debian package cryptcost installs for any need."""
    found = set(BOOTSTRAP) | set(GUEST) | set(GUEST_KERNELS.values()) | set(TESTS) | set(ZFS)
    found |= {t.package for t in tools.TOOLS.values()}
    for cls in stacks.registry().values():
        found |= stack_packages(cls)
    return {p for p in found if " " not in p and ":" not in p}
