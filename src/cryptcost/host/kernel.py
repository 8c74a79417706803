"""The kernel: version, crypto drivers from /proc/crypto, and the features
the stacks need (dm-crypt, AF_ALG, FUSE, fscrypt, loop, netns, TUN, ESP,
WireGuard, NFS)."""

from __future__ import annotations

import functools
import gzip
import os
import platform
import socket
import re
from pathlib import Path

from cryptcost import proc
from cryptcost.host import key_value_blocks, read_text


def parse_crypto(text: str) -> list[dict]:
    """Entries of /proc/crypto as dicts (name, driver, module, priority, type, …)."""
    entries = []
    for entry in key_value_blocks(text):
        if "name" in entry:
            if "priority" in entry and entry["priority"].lstrip("-").isdigit():
                entry["priority"] = int(entry["priority"])
            entries.append(entry)
    return entries


def classify_driver(driver: str) -> str:
    """``software`` or ``hardware-accelerated`` for a driver name."""
    low = driver.lower()
    if any(m in low for m in ("aesni", "vaes", "avx", "padlock", "-ce", "clmul", "ssse3", "sse2")):
        return "hardware-accelerated"
    return "software"


def crypto_drivers(text: str | None = None) -> dict[str, dict]:
    """The selected driver (highest priority) per algorithm name.

    Each value: ``{driver, priority, module, type, implementation}`` where
    implementation is ``software`` or ``hardware-accelerated``.
    """
    if text is None:
        try:
            text = Path("/proc/crypto").read_text()
        except OSError:
            return {}
    best: dict[str, dict] = {}
    for e in parse_crypto(text):
        name = e["name"]
        prio = e.get("priority", 0)
        if name not in best or prio > best[name]["priority"]:
            best[name] = {"driver": e.get("driver", "?"), "priority": prio,
                          "module": e.get("module", "?"), "type": e.get("type", "?"),
                          "implementation": classify_driver(e.get("driver", ""))}
    return dict(sorted(best.items()))


@functools.lru_cache(maxsize=None)
def _running_kernels(listing: str) -> str | None:
    """A file that only a new kernel changes, read once a process (planning asks the kernel's
    features thousands of times): /lib/modules' ``modules.builtin`` or ``modules.dep`` of the
    running kernel, or its config (``config.gz``, from /proc); None where it is missing."""
    try:
        if listing == "config.gz":
            with gzip.open("/proc/config.gz", "rt") as fh:
                return fh.read()
        return Path("/lib/modules", platform.release(), listing).read_text()
    except OSError:
        return None


def _module_present(*names: str) -> bool:
    """Built in or loaded (/sys/module), or loadable from /lib/modules."""
    for name in names:
        if Path("/sys/module", name.replace("-", "_")).exists():
            return True
    for listing in ("modules.builtin", "modules.dep"):
        text = _running_kernels(listing)
        if text is None:
            continue
        for name in names:
            for variant in {name, name.replace("_", "-"), name.replace("-", "_")}:
                if f"/{variant}.ko" in text:
                    return True
    return False


@functools.lru_cache(maxsize=None)
def stock_version() -> str | None:
    """The kernel Debian's ``linux-image-amd64`` stands for, if it is installed (asked once a
    process)."""
    try:
        done = proc.run(["dpkg-query", "-W", "-f=${Depends}", "linux-image-amd64"], check=False,
                        timeout=30)
    except Exception:
        return None
    m = re.search(r"linux-image-(\S+)", done.stdout) if done.returncode == 0 else None
    return m.group(1) if m else None


@functools.lru_cache(maxsize=None)
def bootable_with(module: str) -> tuple[str, ...]:
    """The kernels under /boot (newest first) whose modules in /lib/modules include ``module``
    (an out-of-tree one DKMS built for them, such as zfs): a guest booted on one can load it.
    Read once a process, as planning asks it for every cell."""
    out = []
    for image in Path("/boot").glob("vmlinuz-*"):
        release = image.name.removeprefix("vmlinuz-")
        try:
            dep = Path("/lib/modules", release, "modules.dep").read_text()
        except OSError:
            continue
        if re.search(rf"(^|/){re.escape(module)}\.ko(\.\w+)?:", dep, re.M):
            out.append(release)
    return tuple(sorted(out, key=_release_key, reverse=True))


def _release_key(release: str) -> tuple:
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.+-]", release))


def _in_filesystems(name: str) -> bool:
    try:
        return any(line.split()[-1] == name
                   for line in Path("/proc/filesystems").read_text().splitlines())
    except OSError:
        return False


def _misc(name: str) -> bool:
    try:
        return any(line.split()[-1] == name for line in Path("/proc/misc").read_text().splitlines())
    except OSError:
        return False


def af_alg() -> bool:
    """Whether the kernel crypto user-space API (AF_ALG) exists."""
    family = getattr(socket, "AF_ALG", None)
    if family is None:
        return False
    try:
        socket.socket(family, socket.SOCK_SEQPACKET).close()
        return True
    except OSError:
        return False


def _builtin(name: str, config: str) -> bool:
    """Built into the running kernel: modules.builtin lists it, or the
    kernel's own config (/proc/config.gz) says ``config=y``."""
    text = _running_kernels("modules.builtin") or ""
    if any(line.rsplit("/", 1)[-1] == f"{name}.ko" for line in text.splitlines()):
        return True
    return f"{config}=y\n" in (_running_kernels("config.gz") or "")


def features() -> dict[str, dict]:
    """Each kernel feature: ``{present: bool, how: str}`` (how it was detected)."""
    def feat(present: bool, how: str) -> dict:
        return {"present": bool(present), "how": how}

    dm = _misc("device-mapper") or Path("/dev/mapper/control").exists()
    return {
        "device-mapper": feat(dm, "/proc/misc device-mapper"),
        "dm-crypt": feat(dm and _module_present("dm_crypt"), "/sys/module/dm_crypt or modules"),
        "af_alg": feat(af_alg(), "socket(AF_ALG)"),
        "fuse": feat(Path("/dev/fuse").exists() and _in_filesystems("fuse"), "/dev/fuse"),
        "fscrypt": feat(Path("/sys/fs/ext4/features/encryption").exists(),
                        "/sys/fs/ext4/features/encryption"),
        "loop": feat(Path("/dev/loop-control").exists(), "/dev/loop-control"),
        "brd": feat(_module_present("brd") or Path("/dev/ram0").exists(), "brd module"),
        "netns": feat(Path("/proc/self/ns/net").exists(), "/proc/self/ns/net"),
        "veth": feat(_module_present("veth") or _builtin("veth", "CONFIG_VETH"),
                     "veth module or built in"),
        "tun": feat(Path("/dev/net/tun").exists(), "/dev/net/tun"),
        "netem": feat(_module_present("sch_netem") or _builtin("sch_netem", "CONFIG_NET_SCH_NETEM"),
                      "sch_netem module or built in"),
        "xfrm": feat(Path("/proc/net/xfrm_stat").exists(), "/proc/net/xfrm_stat"),
        "esp": feat(_module_present("esp4"), "esp4 module"),
        "wireguard": feat(_module_present("wireguard"), "wireguard module"),
        "nfs": feat((_in_filesystems("nfs4") or _module_present("nfsv4"))
                    and (_in_filesystems("nfsd") or _module_present("nfsd")),
                    "/proc/filesystems nfs4 and nfsd, or their modules"),
        "zfs": feat(_module_present("zfs") or _in_filesystems("zfs"), "zfs module"),
        "xfs": feat(_in_filesystems("xfs"), "/proc/filesystems"),
        "btrfs": feat(_in_filesystems("btrfs"), "/proc/filesystems"),
        "ecryptfs": feat(_in_filesystems("ecryptfs") or _module_present("ecryptfs"), "ecryptfs"),
    }


def drivers_for(algorithm: str) -> dict:
    """The kernel's drivers for ``aes-256-xts`` and the like (``xts(aes)``,
    ``aes``), read now: after a stack or benchmark has made the kernel build
    its transform, so the driver really used is listed (rule 13)."""
    parts = algorithm.split("-")
    cipher, mode = parts[0], parts[-1] if len(parts) > 2 else None
    drivers = crypto_drivers()
    names = [f"{mode}({cipher})"] if mode else []
    return {n: drivers[n] for n in names + [cipher] if n in drivers}


def kernel_info() -> dict:
    uname = os.uname()
    return {"release": uname.release, "version": uname.version, "machine": uname.machine}


PAGE_REPORTING = Path("/sys/module/page_reporting/parameters")
# a setting cryptcost may change
PAGE_REPORTING_ORDER = str(PAGE_REPORTING / "page_reporting_order")


def free_block_orders(buddyinfo: str = "/proc/buddyinfo") -> int | None:
    """How many block orders the page allocator has (0 … MAX_PAGE_ORDER): no
    free block is ever of this order or larger; None when unreadable."""
    try:
        lines = Path(buddyinfo).read_text().splitlines()
    except OSError:
        return None
    counts = [len(line.split(",", 1)[1].split()) - 2 for line in lines if "zone" in line]
    return max(counts) if counts else None


def reported_bytes(root: Path = PAGE_REPORTING) -> int | None:
    """What free page reporting has handed back to the host since boot, where
    the kernel counts it (``reported_kib``, not in every kernel); else None."""
    try:
        return int((root / "reported_kib").read_text().split()[0]) << 10
    except (OSError, ValueError, IndexError):
        return None


def page_reporting(root: Path = PAGE_REPORTING) -> dict | None:
    """Free page reporting (a VM's balloon driver hands freed memory back to
    its host): its settings as the kernel shows them (not its counters), or
    None when the kernel has no reporting; ``enabled``: a balloon device
    negotiated it."""
    if not root.is_dir():
        return None
    out = {}
    for p in sorted(root.iterdir()):
        try:
            if not p.stat().st_mode & 0o200:          # a read-only counter, not a setting
                continue
            value = p.read_text().strip()
        except OSError:
            continue
        out[p.name] = int(value) if value.lstrip("-").isdigit() else value
    out["enabled"] = any(_reports(dev) for dev in Path(BALLOON).glob("virtio*"))
    return out


DAMON = Path("/sys/kernel/mm/damon/admin/kdamonds")


def damon_pageout(root: Path = DAMON) -> list[dict] | None:
    """DAMON's running schemes that page out memory left idle (a host's proactive reclaim):
    for each, the idle time after which a region goes (its minimum age, in aggregation
    intervals) and its quota; [] where DAMON runs none, None where the kernel has no DAMON
    sysfs interface. What a run reads again after a pause may then come from disk."""
    if not root.is_dir():
        return None
    out = []
    for kd in sorted(p for p in root.iterdir() if p.name.isdigit()):
        if read_text(kd / "state") != "on":
            continue
        for ctx in sorted(p for p in (kd / "contexts").glob("[0-9]*")):
            aggr = read_text(ctx / "monitoring_attrs" / "intervals" / "aggr_us")
            for sch in sorted(p for p in (ctx / "schemes").glob("[0-9]*")):
                age = read_text(sch / "access_pattern" / "age" / "min")
                if read_text(sch / "action") != "pageout" or not (age.isdigit() and aggr.isdigit()):
                    continue
                quota = read_text(sch / "quotas" / "bytes")
                reset = read_text(sch / "quotas" / "reset_interval_ms")
                out.append({"kdamond": int(kd.name), "operations": read_text(ctx / "operations"),
                            "idle_s": int(age) * int(aggr) / 1e6,
                            "quota_bytes": int(quota) if quota.isdigit() else None,
                            "quota_reset_ms": int(reset) if reset.isdigit() else None})
    return out


BALLOON = "/sys/bus/virtio/drivers/virtio_balloon"
F_REPORTING = 5                                   # VIRTIO_BALLOON_F_REPORTING


def _reports(dev: Path) -> bool:
    """A bound balloon device that negotiated free page reporting."""
    bits = read_text(dev / "features")
    return len(bits) > F_REPORTING and bits[F_REPORTING] == "1"
