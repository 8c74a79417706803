"""Debian packages installed without opening a door: no service started, none left enabled.

On a host booted with systemd, Debian enables the services a package ships when it installs
it, and starts them, then and at every boot (Samba on 139 and 445, rpcbind on 111, sshd on
22 …). cryptcost runs its own daemons in its own namespaces with its own configuration and
needs none of them, so each install it makes (:func:`install`):

1. refuses every service start while dpkg runs: a ``/usr/sbin/policy-rc.d`` that exits 101,
   Debian's own mechanism, which invoke-rc.d and deb-systemd-invoke both honour;
2. reads every unit file's state before and after, and disables again each unit the install
   enabled (``systemctl disable``, which leaves deb-systemd-helper's record of the unit, so
   that an upgrade does not enable it again); a unit enabled before is left as it was;
3. records what it installed, disabled and left in :func:`record_path`, so that ``make``
   can say it, and a later install never undoes a choice the user has made since.

Earlier versions of cryptcost installed with apt-get alone and left those units enabled.
:func:`mend_earlier` finds their installs in apt's history, by their command lines, and
disables once what the packages they brought enabled; a package the user installed is left
alone.

This module needs the standard library and :mod:`cryptcost.proc` alone, so that
``python3 -m cryptcost.host.apt python3-venv`` can run before the venv exists.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import UserError

POLICY = Path("/usr/sbin/policy-rc.d")
POLICY_TEXT = ("#!/bin/sh\n# cryptcost install: no service starts while packages are installed "
               "(removed after it)\nexit 101\n")
SAVED = POLICY.with_name("policy-rc.d.cryptcost-saved")
HISTORY = Path("/var/log/apt")
UNIT_DIRS = ("/lib/systemd/system/", "/usr/lib/systemd/system/")
UNIT_KINDS = (".service", ".socket", ".timer", ".target", ".path", ".mount", ".automount")
ENABLED = frozenset({"enabled", "enabled-runtime"})

# Every package the project's earlier versions installed with plain apt-get (the union of
# packaging/debian-packages.txt's history), and the command lines they did it with: how
# :func:`mend_earlier` tells their installs from the user's.
EARLIER_PACKAGES = frozenset("""
bindfs binutils bonnie++ btrfs-progs busybox-static charon-systemd chromium cpio cryfs
cryptsetup-bin dbench dmsetup e2fsprogs ecryptfs-utils encfs ethtool file fio fuse3 gocryptfs
iperf3 iproute2 keyutils kmod krb5-admin-server krb5-kdc krb5-user libcharon-extra-plugins
libstrongswan-extra-plugins libstrongswan-standard-plugins linux-image-6.12-amd64
linux-image-amd64 linux-perf mount nfs-common nfs-kernel-server openssh-client openssh-server
openssl python3-venv qemu-block-extra qemu-system-common qemu-system-x86 qemu-utils rclone
rpcbind rsync samba securefs smbclient strongswan-swanctl stunnel4 sudo tar tcpdump tcplay
util-linux wireguard-go wireguard-tools xfsprogs golang-go zfs-dkms zfsutils-linux
""".split())
EARLIER_COMMANDS = (
    re.compile(r"apt-get install -y -qq --no-install-recommends (?P<pkgs>[\w.+ -]+)$"),
    re.compile(r"apt-get install -y -qq (?P<pkgs>golang-go)$"),
    re.compile(r"apt-get -o Dir::Etc::sourcelist=\S+ -o Dir::Etc::sourceparts=\S+ "
               r"-o Dir::State::Lists=\S+ install -y -qq --no-install-recommends "
               r"(?P<pkgs>zfs-dkms zfsutils-linux linux-headers-\S+)$"),
)


def record_path() -> Path:
    """Where cryptcost records what its installs changed (``CRYPTCOST_SETUP_RECORD``)."""
    return Path(os.environ.get("CRYPTCOST_SETUP_RECORD", "/var/lib/cryptcost/setup.json"))


@dataclass
class Change:
    """One install: what it was for, what it brought, and what it did to the host's units."""

    for_: str
    asked: list[str]
    brought: list[str] = field(default_factory=list)     # every package new after it
    disabled: list[str] = field(default_factory=list)    # units it enabled, disabled again
    left: list[str] = field(default_factory=list)        # its packages' units enabled before
    at: str = ""
    seconds: float = 0.0


def read_record() -> dict:
    try:
        return json.loads(record_path().read_text())
    except (OSError, ValueError):
        return {"version": 1, "installs": [], "earlier": None}


def _write_record(data: dict) -> None:
    path = record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


# --- what is installed, and which units are enabled ------------------------------------------

def installed(packages: list[str] | None = None) -> set[str]:
    """The packages dpkg holds installed (of ``packages``; None: all of them)."""
    argv = ["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n", *(packages or [])]
    done = proc.run(argv, timeout=60, check=False)
    return {line.split()[0].split(":")[0] for line in done.stdout.splitlines()
            if len(line.split()) > 1 and line.split()[1].startswith("ii")}


def unit_states() -> dict[str, str]:
    """Every unit file's state (``enabled``, ``disabled``, ``static`` …), as systemctl reads
    it from the filesystem: this needs no systemd running."""
    if not proc.which("systemctl"):
        return {}
    done = proc.run(["systemctl", "list-unit-files", "--no-legend", "--no-pager"], timeout=60,
                    check=False)
    return {f[0]: f[1] for f in (line.split() for line in done.stdout.splitlines()) if len(f) > 1}


def units_of(package: str) -> list[str]:
    """The systemd units a package ships (its services, sockets, timers, targets …)."""
    done = proc.run(["dpkg-query", "-L", package], timeout=60, check=False)
    return sorted({Path(p).name for p in done.stdout.splitlines()
                   if f"{Path(p).parent}/" in UNIT_DIRS and p.endswith(UNIT_KINDS)})


def disable(units: list[str]) -> None:
    """``systemctl disable`` each unit (its symlinks go; deb-systemd-helper keeps its record)."""
    if units:
        proc.run(["systemctl", "disable", "--no-reload", *units], timeout=120, check=False)


@contextmanager
def no_service_starts():
    """While dpkg runs, no package may start a service: a policy-rc.d that says 101 to every
    start, removed after; one already there that refuses them too is left as it is, one that
    would let them start is set aside and put back."""
    ours = not (POLICY.exists() and _refuses_all(POLICY))
    if ours:
        if POLICY.exists():
            POLICY.replace(SAVED)
        POLICY.write_text(POLICY_TEXT)
        POLICY.chmod(0o755)
    try:
        yield
    finally:
        if ours:
            POLICY.unlink(missing_ok=True)
            if SAVED.exists():
                SAVED.replace(POLICY)


def _refuses_all(path: Path) -> bool:
    """A policy-rc.d whose only command is ``exit 101`` (Docker's base images ship one)."""
    try:
        lines = [ln.strip() for ln in path.read_text().splitlines()]
    except OSError:
        return False
    return [ln for ln in lines if ln and not ln.startswith("#")] == ["exit 101"]


# --- installing ------------------------------------------------------------------------------

def missing(packages: list[str]) -> list[str]:
    have = installed(sorted(set(packages)))
    return sorted(p for p in set(packages) if p not in have)


def install(packages: list[str], for_: str, *, apt_options: tuple[str, ...] = (),
            say=print) -> Change:
    """Install what of ``packages`` is missing with no service started or left enabled, and
    record it (``apt_options``: apt-get's own ``-o`` options, for sources of the call's own)."""
    change = Change(for_, missing(packages), at=_now())
    if not change.asked:
        return change
    if os.geteuid() != 0:
        raise UserError(f"installing {len(change.asked)} Debian package(s) needs root: run "
                        "it with sudo")
    start = time.monotonic()
    units, before = unit_states(), installed()
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    with no_service_starts():
        proc.run(["apt-get", *apt_options, "update", "-qq"], timeout=900, env=env, shown=True)
        proc.run(["apt-get", *apt_options, "install", "-y", "-qq", "--no-install-recommends",
                  *change.asked], timeout=3600, env=env, shown=True)
    after = unit_states()
    change.disabled = sorted(u for u, s in after.items()
                             if s in ENABLED and units.get(u) not in ENABLED)
    disable(change.disabled)
    change.brought = sorted(installed() - before)
    change.left = sorted(u for p in change.brought for u in units_of(p)
                         if units.get(u) in ENABLED)
    change.seconds = round(time.monotonic() - start, 1)
    data = read_record()
    data["installs"].append(asdict(change))
    _write_record(data)
    if change.disabled:
        say(f"cryptcost install: disabled {len(change.disabled)} unit(s) the install enabled, "
            f"none started: {', '.join(change.disabled)} (recorded in {record_path()})")
    return change


@contextmanager
def with_contrib():
    """apt-get options that read this host's sources with Debian's ``contrib`` component added,
    from lists of their own in a temporary directory: the host's sources stay as they are."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="cryptcost-apt-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)                           # apt downloads as _apt
        (root / "parts").mkdir()
        (root / "lists" / "partial").mkdir(parents=True)
        for part in Path("/etc/apt/sources.list.d").glob("*.sources"):
            (root / "parts" / part.name).write_text(re.sub(
                r"^(Components:(?!.*\bcontrib\b).*)$", r"\1 contrib", part.read_text(), flags=re.M))
        main = Path("/etc/apt/sources.list")
        text = main.read_text() if main.exists() else ""
        (root / "sources.list").write_text(re.sub(
            r"^(deb\s(?!.*\bcontrib\b).*\bmain\b.*)$", r"\1 contrib", text, flags=re.M))
        yield ("-o", f"Dir::Etc::sourcelist={root}/sources.list",
               "-o", f"Dir::Etc::sourceparts={root}/parts", "-o", f"Dir::State::Lists={root}/lists")


# --- installs of earlier versions ------------------------------------------------------------

def history() -> list[dict]:
    """apt's history, oldest first: each transaction's start, command line and the packages it
    installed (``Install:``, automatic ones included)."""
    texts = []
    for path in sorted(HISTORY.glob("history.log*"), key=_age, reverse=True):
        try:
            raw = path.read_bytes()
            texts.append((gzip.decompress(raw) if path.suffix == ".gz" else raw).decode(
                errors="replace"))
        except (OSError, EOFError):
            continue
    out = []
    for block in "\n".join(texts).split("\n\n"):
        entry = dict(line.split(": ", 1) for line in block.strip().splitlines() if ": " in line)
        if "Commandline" in entry:
            out.append({"start": entry.get("Start-Date", ""), "command": entry["Commandline"],
                        "installed": re.findall(r"([a-z0-9][a-z0-9+.-]+):\w+ \(",
                                                entry.get("Install", ""))})
    return out


def _age(path: Path) -> int:
    match = re.search(r"\.(\d+)(?:\.gz)?$", path.name)
    return int(match.group(1)) if match else 0


def earlier_installs() -> list[dict]:
    """The transactions in apt's history that earlier versions of cryptcost made."""
    found = []
    for entry in history():
        for pattern in EARLIER_COMMANDS:
            match = pattern.search(entry["command"])
            if match and set(match.group("pkgs").split()) <= EARLIER_PACKAGES | {
                    p for p in match.group("pkgs").split() if p.startswith("linux-headers-")}:
                found.append(entry)
                break
    return found


def mend_earlier(say=print) -> dict:
    """Once per install an earlier version made: disable each unit that the packages it
    brought left enabled; a unit of a package the user installed is left alone. The record keeps
    each mended install (by its start in apt's history), so a later install never disables what
    the user has enabled since; only an earlier version's install made after the last mend (an
    older checkout's ``make``) is mended again."""
    data = read_record()
    done = data.get("earlier") or {}
    seen = set(done.get("installs", []))
    entries = [e for e in earlier_installs() if e["start"] not in seen]
    if data.get("earlier") is not None and not entries:
        return data["earlier"]
    brought = sorted({p for e in entries for p in e["installed"]} & installed())
    states = unit_states()
    units = sorted({u for p in brought for u in units_of(p) if states.get(u) in ENABLED})
    if units and os.geteuid() != 0:
        raise UserError(f"earlier installs of cryptcost left {len(units)} unit(s) enabled "
                        f"({', '.join(units[:4])}…): run it as root to disable them")
    disable(units)
    data["earlier"] = {"at": _now(), "installs": sorted(seen | {e["start"] for e in entries}),
                       "brought": sorted(set(done.get("brought", [])) | set(brought)),
                       "disabled": sorted(set(done.get("disabled", [])) | set(units))}
    _write_record(data)
    if units:
        say(f"cryptcost install: disabled {len(units)} unit(s) that an earlier cryptcost's "
            f"install enabled: {', '.join(units)} (recorded in {record_path()})")
    return data["earlier"]


def main(argv: list[str]) -> int:
    """``python3 -m cryptcost.host.apt FOR PACKAGE…``: the install the Makefile makes before
    the venv exists (python3-venv, go)."""
    if len(argv) < 2:
        print("usage: python3 -m cryptcost.host.apt FOR PACKAGE…", file=sys.stderr)
        return 2
    try:
        mend_earlier()
        todo = missing(argv[1:])
        if todo:
            print(f"cryptcost install: {argv[0]}: {len(todo)} Debian package(s): "
                  f"{' '.join(todo)}")
        install(argv[1:], argv[0])
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:           # the one line a make rule shows
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
