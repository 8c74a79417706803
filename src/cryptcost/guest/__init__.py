"""A cryptcost command run under Debian's stock kernel, in a qemu guest.

The host's kernel may lack what users' servers have (dm-crypt, AF_ALG,
ESP, the WireGuard module). The guest boots ``linux-image-amd64``'s kernel
with a busybox initramfs built here (:mod:`cryptcost.guest.image`),
sees the host's root filesystem read-only over virtio-9p with a writable
overlay on a scratch disk, and runs ``cryptcost COMMAND …`` as root.

What comes back, through a second (writable) 9p share:
- the command's stdout and stderr, relayed as they grow;
- its exit code;
- its result store, whose runs the caller imports marked ``emulated``.

The console log is kept next to the host's store whatever happens; a
guest that fails to boot is named in one line; one that runs past its
timeout has its command stopped (SIGTERM, through the share), and is
killed if it does not end in :data:`STOP_GRACE` s.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import CryptcostError, ProcessError, UserError
from cryptcost.host import tools
from cryptcost.host.probe import EMULATED_FILE
from cryptcost.stacks import stack_tools
from cryptcost.lifecycle.resources import Resources, Terminated
from cryptcost.guest.console import (BOOTS, RUNNING, Relay, boot_again, failure_cause,
                                     keep_log)
from cryptcost.guest.image import CACHE, GuestKernel, build_initrd, find_kernel
from cryptcost.guest.image import qemu as image_qemu

GUEST_DB = "/var/lib/cryptcost-guest/results.db"
XCHG = "/cc-xchg"                     # the writable share, inside the guest
GUEST_HOSTNAME = "cc-guest"           # the guest's hostname, as its runs record it
# how often the guest copies its store out while the command runs (a consistent SQLite backup,
# at the lowest priority), so that a guest killed (or crashed) keeps what it measured; the
# environment's CRYPTCOST_GUEST_BACKUP_SECONDS, where set, instead
BACKUP_SECONDS = 120
PARTIAL = "partial.db"
# at its --timeout, a guest whose command began is asked to stop it (the host writes this file
# in the share; the command gets SIGTERM, stores each series it was measuring as an incomplete
# result and releases what it holds), and is killed only if it has not ended STOP_GRACE s later
STOP = "stop"
STOP_GRACE = 300.0


class GuestCut(CryptcostError):
    """The guest ended before its command did: stopped at its timeout, or gone without an exit
    code (killed, its qemu stopped or crashed); ``partial`` is its store, whole where its
    command was stopped in time (the run ``interrupted``), else as last copied out (every
    result measured until then, the run left ``running``), or None; ``emulated`` what its
    results carry (:func:`emulation`); ``interrupt``, the Ctrl-C or SIGTERM that stopped it,
    for the caller to raise again once it has imported the store."""

    def __init__(self, message: str, partial: Path | None, emulated: dict,
                 interrupt: BaseException | None = None):
        super().__init__(message)
        self.partial, self.emulated, self.interrupt = partial, emulated, interrupt


@dataclass
class VmOptions:
    timeout: float = 1800
    memory_mib: int = 2048
    cpus: int = 2
    # kvm where it boots the kernel quickly, else tcg
    accel: str = "auto"
    kernel: str | None = None                        # a version under /boot; the newest by default
    blacklist: tuple[str, ...] = ()                   # kernel modules the guest must not load
    scratch_gib: int = 8

    def validate(self) -> None:
        if self.accel not in ("auto", "tcg", "kvm"):
            raise UserError(f"--accel must be auto, tcg or kvm, not {self.accel!r}")
        if self.accel == "kvm" and not os.access("/dev/kvm", os.R_OK | os.W_OK):
            raise UserError("--accel kvm needs a usable /dev/kvm (use --accel tcg)")
        if not 1 <= self.cpus <= 64:
            raise UserError(f"--cpus must be between 1 and 64, not {self.cpus}")
        if not 256 <= self.memory_mib <= 1 << 20:
            raise UserError(f"--memory must be at least 256 MiB, not {self.memory_mib}")
        if self.timeout <= 0:
            raise UserError("--timeout must be positive")
        for name in self.blacklist:
            if not re.fullmatch(r"[\w-]+", name):
                raise UserError(f"--blacklist takes kernel module names, not {name!r}")


@dataclass
class GuestOutcome:
    returncode: int
    kernel: GuestKernel
    console: Path                                    # the kept log
    store: Path | None                               # the guest's result store, copied out
    seconds: float
    emulated: dict = field(default_factory=dict)


# TCG boots the kernel to its root mount in seconds; KVM in under one
KVM_PROBE_SECONDS = 10.0


def choose_accel(opts: VmOptions, kernel: GuestKernel) -> tuple[str, str]:
    """(accelerator, why) for ``--accel auto``: KVM when /dev/kvm boots the guest
    kernel to its root mount within KVM_PROBE_SECONDS, TCG otherwise. Nested KVM
    often aborts (``failed to set MSR``) or runs ~100× slower than TCG; the probe
    (one kernel boot, no initramfs) is remembered per kernel and qemu binary."""
    if opts.accel != "auto":
        return opts.accel, "asked for"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg", "no usable /dev/kvm"
    qemu = image_qemu()
    memo = CACHE / f"kvm-{kernel.version}-{os.stat(qemu).st_mtime_ns}.json"
    try:
        verdict = json.loads(memo.read_text())
        return verdict["accel"], verdict["why"]
    except (OSError, ValueError, KeyError):
        pass
    argv = [qemu, "-accel", "kvm", "-cpu", "host", "-m", "256", "-smp", "1", "-display", "none",
            "-nodefaults",
            "-no-reboot", "-serial", "stdio", "-kernel", str(kernel.image),
            "-append", "console=ttyS0 panic=-1 root=/dev/cc-none"]
    try:
        done = proc.run(argv, timeout=KVM_PROBE_SECONDS, check=False)
    except ProcessError:
        accel, why = "tcg", (f"KVM did not boot the kernel within {KVM_PROBE_SECONDS:g} s (nested "
                             "virtualisation?), so TCG")
    else:
        if "Kernel panic" in done.stdout:
            accel, why = "kvm", f"KVM boots the kernel in {done.seconds:.1f} s"
        else:
            lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
            accel, why = ("tcg",
                          "KVM failed "
                          f"({lines[0] if lines else f'exit code {done.returncode}'}), so TCG")
    try:
        CACHE.mkdir(parents=True, exist_ok=True)
        memo.write_text(json.dumps({"accel": accel, "why": why}))
    except OSError:
        pass
    return accel, why


def emulation(opts: VmOptions, kernel: GuestKernel, accel_why: str = "asked for") -> dict:
    """What every result measured in the guest carries: how it was emulated."""
    return {"emulator": "qemu-system-x86_64", "accel": opts.accel, "accel_why": accel_why,
            "kernel": kernel.version,
            "cpus": opts.cpus, "memory_mib": opts.memory_mib, "blacklist": list(opts.blacklist),
            "why": ("measured in a qemu guest" + (" under TCG (software CPU emulation)"
                    if opts.accel == "tcg" else " under KVM") + ": its speeds are not those of "
                    "real hardware and are never ranked against, or compared with, them")}


def _backup_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get("CRYPTCOST_GUEST_BACKUP_SECONDS", BACKUP_SECONDS)))
    except ValueError:
        return BACKUP_SECONDS


def _code_root() -> str:
    """Where this cryptcost is imported from: the guest imports the same code, whatever the
    interpreter's own path holds (a checkout beside an editable install)."""
    import cryptcost
    return str(Path(cryptcost.__file__).resolve().parents[1])


def guest_script(argv: list[str], cwd: str, emulated: dict, body: str | None = None) -> str:
    """The guest's PID 1 after switch_root: private /run, modules, then the command and its
    store, run with this cryptcost's code; or ``body`` instead of the command (``vm --peer``:
    the network and sshd)."""
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "cryptcost", "--db", GUEST_DB,
                                            *argv])
    prelude = f"""#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 TERM=dumb COLUMNS=120
export PYTHONPATH={shlex.quote(_code_root())}
export CRYPTCOST_EMULATED={shlex.quote(json.dumps(emulated))}
export {tools.KNOWN}={XCHG}/tools.json
mount -t tmpfs -o mode=0755 tmpfs /run
printf '%s' "$CRYPTCOST_EMULATED" > {EMULATED_FILE}
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
hostname {GUEST_HOSTNAME}
ip link set lo up
for m in loop dm_mod fuse tun; do modprobe -q $m; done
mkdir -p {os.path.dirname(GUEST_DB)}
"""
    if body is not None:
        return prelude + body
    backup = " ".join(shlex.quote(a) for a in [
        "nice", "-n", "19", sys.executable, "-c",
        "import sqlite3, sys; s = sqlite3.connect(sys.argv[1]); d = sqlite3.connect(sys.argv[2]); "
        "s.backup(d); d.close(); s.close()", GUEST_DB, f"{XCHG}/{PARTIAL}.tmp"])
    return prelude + f"""echo "{RUNNING}" > /dev/console
cd {shlex.quote(cwd)} 2>/dev/null || cd /
(while sleep {_backup_seconds():g}; do
  [ -e {GUEST_DB} ] && {backup} 2>/dev/null && mv {XCHG}/{PARTIAL}.tmp {XCHG}/{PARTIAL}
done) &
copier=$!
{cmd} > {XCHG}/stdout 2> {XCHG}/stderr &
command=$!
(while kill -0 $command 2>/dev/null; do
  [ -e {XCHG}/{STOP} ] && kill -TERM $command && break
  sleep 5
done) &
stopper=$!
wait $command
echo $? > {XCHG}/rc.tmp
kill $copier $stopper 2>/dev/null
for f in {GUEST_DB} {GUEST_DB}-wal {GUEST_DB}-shm; do [ -e "$f" ] && cp "$f" {XCHG}/; done
mv {XCHG}/rc.tmp {XCHG}/rc
sync
echo "cc-guest: done" > /dev/console
echo o > /proc/sysrq-trigger
sleep 60
"""


def qemu_argv(opts: VmOptions, kernel: GuestKernel, initrd: Path, scratch: Path, xchg: Path,
              console: Path, tap: str | None = None) -> list[str]:
    append = ["console=ttyS0", "quiet", "panic=-1", "rdinit=/init"]
    if opts.blacklist:
        append.append("modprobe.blacklist=" + ",".join(opts.blacklist))
    return ["qemu-system-x86_64", "-accel", opts.accel, "-cpu",
            "max" if opts.accel == "tcg" else "host",
            "-m", str(opts.memory_mib), "-smp", str(opts.cpus), "-display", "none", "-nodefaults",
            "-no-reboot", "-serial", f"file:{console}", "-kernel", str(kernel.image), "-initrd",
            str(initrd),
            "-append", " ".join(append),
            "-drive", f"file={scratch},format=raw,if=virtio,cache=unsafe",
            "-virtfs",
            "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            "-virtfs", f"local,path={xchg},mount_tag=xchg,security_model=none",
            *(["-netdev", f"tap,id=n0,ifname={tap},script=no,downscript=no",
               "-device", "virtio-net-pci,netdev=n0"] if tap else [])]


@dataclass
class Boot:
    """What one boot of the guest needs on this host."""

    opts: VmOptions
    kernel: GuestKernel
    initrd: Path
    work: Path
    xchg: Path
    scratch: Path
    console: Path
    kept: Path                                       # where the console log is kept
    emulated: dict

    def qemu(self, tap: str | None = None) -> list[str]:
        return qemu_argv(self.opts, self.kernel, self.initrd, self.scratch, self.xchg,
                         self.console, tap)


def prepare(res: Resources, opts: VmOptions, log_dir: Path) -> Boot:
    """The kernel, its accelerator, the initramfs, a scratch disk and the exchange share."""
    opts.validate()
    kernel = find_kernel(opts.kernel)
    image_qemu()
    accel, accel_why = choose_accel(opts, kernel)
    opts = replace(opts, accel=accel)
    initrd = build_initrd(kernel)
    work = res.tmpdir("cryptcost-vm-")
    xchg = work / "xchg"
    xchg.mkdir()
    scratch = work / "scratch.img"
    with open(scratch, "wb") as fh:
        fh.truncate(opts.scratch_gib << 30)
    proc.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1", str(scratch)], timeout=120)
    # the guest runs this root filesystem: the same programs, whose versions it need not ask again
    (xchg / "tools.json").write_text(json.dumps(tools.versions(stack_tools())))
    log_dir.mkdir(parents=True, exist_ok=True)
    kept = log_dir / f"vm-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
    return Boot(opts, kernel, initrd, work, xchg, scratch, work / "console.log", kept,
                 emulation(opts, kernel, accel_why))


def run_guest(res: Resources, argv: list[str], opts: VmOptions, log_dir: Path,
              stdout=None, stderr=None, files: dict[str, str] | None = None) -> GuestOutcome:
    """Boot the guest, run ``cryptcost ARGV`` in it, relay its output, and
    return its exit code and result store. ``files`` (name: text) are in the guest's
    exchange share, under /cc-xchg. Raise :class:`CryptcostError`
    (console log kept) when it does not boot, or does not finish in time."""
    boot = prepare(res, opts, log_dir)
    for name, text in (files or {}).items():
        (boot.xchg / name).write_text(text)
    opts, xchg, work, kept, kernel, emulated = (boot.opts, boot.xchg, boot.work, boot.kept,
                                                boot.kernel, boot.emulated)
    (xchg / "guest.sh").write_text(guest_script(argv, os.getcwd(), emulated))
    console = boot.console
    said = stderr or sys.stderr.buffer
    relays = [Relay(xchg / "stdout", stdout or sys.stdout.buffer), Relay(xchg / "stderr", said)]
    rc = xchg / "rc"
    interrupt: BaseException | None = None
    for attempt in range(1, BOOTS + 1):
        start = time.monotonic()
        qemu = res.daemon(boot.qemu(), logfile=str(work / "qemu.log"))
        try:
            try:
                while qemu.alive() and time.monotonic() - start < opts.timeout:
                    for r in relays:
                        r.pump()
                    time.sleep(0.2)
                timed_out = qemu.alive()
                stopped = timed_out and _stop_command(qemu, xchg, console, relays)
            except (KeyboardInterrupt, Terminated) as exc:
                # stopped as at the timeout, so that the series it was in are kept; a second
                # signal while it stops ends it at once (the daemon's release kills qemu)
                interrupt, timed_out = exc, False
                said.write(b"cryptcost vm: stopping the guest's command, which stores what it "
                           b"measured (a second Ctrl-C kills the guest)\n")
                said.flush()
                stopped = _stop_command(qemu, xchg, console, relays)
            res.stop(qemu, timeout=5)
        finally:
            for r in relays:
                r.pump()
            keep_log(kept, console, work / "qemu.log")
        again = None if interrupt or timed_out or rc.exists() else boot_again(
            kept.read_text(errors="replace"), emulated["accel"])
        if again is None or attempt == BOOTS:
            break
        first = kept.with_name(f"{kept.stem}-boot{attempt}.log")
        os.replace(kept, first)
        for left in (console, work / "qemu.log", xchg / PARTIAL, *(r.path for r in relays)):
            left.unlink(missing_ok=True)
        for r in relays:
            r.offset = 0
        said.write(f"cryptcost vm: {again} (console log: {first}): booting it again\n".encode())
        said.flush()
    seconds = time.monotonic() - start
    if interrupt or timed_out or not rc.exists():
        # a command stopped in time copied its whole store out; else the last periodic copy
        whole = xchg / os.path.basename(GUEST_DB)
        partial = whole if stopped and rc.exists() and whole.exists() else xchg / PARTIAL
        kept_partial = _move_store(partial, log_dir / f"{kept.stem}-partial.db")
        if interrupt:
            why = ("interrupted: the guest's command was stopped, and stored what it had "
                   "measured" if stopped and rc.exists() else "interrupted: the guest was killed")
        elif timed_out and stopped and rc.exists():
            why = (f"the guest did not finish within {opts.timeout:g} s: its command was "
                   "stopped (SIGTERM), and stored what it had measured")
        elif timed_out:
            why = f"the guest did not finish within {opts.timeout:g} s and was killed"
        else:
            why = f"the guest failed: {failure_cause(kept.read_text(errors='replace'))}"
        raise GuestCut(f"{why} (console log: {kept})", kept_partial, emulated, interrupt)
    store = xchg / os.path.basename(GUEST_DB)
    keep_store = _move_store(store, log_dir / f"{kept.stem}.db")
    return GuestOutcome(int(rc.read_text().strip() or 1), kernel, kept, keep_store, seconds,
                        emulated)


def _move_store(store: Path, to: Path) -> Path | None:
    """Move a SQLite store the guest copied out, with its -wal and -shm files, to ``to``;
    ``to``, or None where there is no store."""
    if not store.exists():
        return None
    for suffix in ("-wal", "-shm", ""):
        if Path(f"{store}{suffix}").exists():
            os.replace(f"{store}{suffix}", f"{to}{suffix}")
    return to


def _stop_command(qemu, xchg: Path, console: Path, relays: list[Relay]) -> bool:
    """At the timeout: ask a guest whose command began to stop it, and wait up to
    :data:`STOP_GRACE` s for the guest to end. Whether it was asked (a guest still booting is
    not: it is killed at once)."""
    try:
        began = RUNNING in console.read_text(errors="replace")
    except OSError:
        began = False
    if not began:
        return False
    (xchg / STOP).write_text("")
    deadline = time.monotonic() + STOP_GRACE
    while qemu.alive() and time.monotonic() < deadline:
        for r in relays:
            r.pump()
        time.sleep(0.2)
    return True
