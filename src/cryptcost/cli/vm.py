"""``cryptcost vm [options] -- COMMAND …``: run ``cryptcost COMMAND …`` under
Debian's stock kernel in a qemu guest, for the stacks this host's kernel
lacks (dm-crypt, AF_ALG, kernel ESP, kernel WireGuard).

The guest command's stdout, stderr and exit code come back unchanged;
what it measured is imported into this host's store as runs marked
``emulated``, which are never ranked against or compared with runs on
real hardware.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cryptcost.cli.common import open_store, parse_list
from cryptcost.errors import CryptcostError, UserError
from cryptcost.lifecycle.lock import run_lock
from cryptcost.lifecycle.resources import Resources, Terminated, install_signal_handlers
from cryptcost import proc
from cryptcost.guest import GuestCut, VmOptions, run_guest
from cryptcost.guest.imported import import_guest_runs, keep_killed
from cryptcost.guest.peer import GuestPeer, serve_peer
from cryptcost.workloads.plan import load

HELP_TAIL = ("The numbers are emulated: under TCG the guest's CPU is software, so its speeds say "
             "what works and roughly how stacks relate, never what real hardware does.")


def add_parser(sub, common) -> None:
    p = sub.add_parser("vm", parents=[common],
                       help="run a cryptcost command under Debian's stock kernel "
                       "in a qemu guest (emulated numbers)", epilog=HELP_TAIL)
    p.add_argument("--timeout", type=float, default=1800, metavar="S",
                   help="kill the guest after S seconds (default 1800)")
    p.add_argument("--memory", type=int, default=2048, metavar="MIB",
                   help="guest memory (default 2048)")
    p.add_argument("--cpus", type=int, default=min(2, os.cpu_count() or 1), metavar="N",
                   help="guest CPUs (default 2, at most this host's)")
    p.add_argument("--accel", choices=("auto", "tcg", "kvm"), default="auto",
                   help="auto (the default: KVM where /dev/kvm boots the guest kernel "
                        "quickly, else TCG), "
                   "tcg (software: works everywhere) or kvm")
    p.add_argument("--kernel", metavar="VERSION", help="a kernel under /boot (default: the newest "
                   "with modules installed)")
    p.add_argument("--blacklist", metavar="MODULES", help="kernel modules the guest must not load, "
                   "e.g. aesni_intel (acceleration off for the kernel's ciphers)")
    p.add_argument("--peer", metavar="ADDRESS/PREFIX",
                   help="run no command: serve the guest as a host reached over ssh, at ADDRESS "
                        "on a tap link to this host (which takes the subnet's first other "
                        "address), e.g. 10.0.0.2/24, for 'cryptcost network --link "
                        "peer:root@10.0.0.2'; it runs until --timeout or Ctrl-C")
    p.add_argument("--authorized-keys", metavar="FILE",
                   help="with --peer: the public keys that may log in as root (default: this "
                        "user's ~/.ssh/id_*.pub)")
    p.add_argument("--host-key", metavar="FILE",
                   help="with --peer: the guest sshd's private host key (default: a new one)")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND …")
    p.set_defaults(func=run)


def guest_argv(argv: list[str]) -> list[str]:
    """The command for the guest, checked here so that bad input costs no boot."""
    from cryptcost.cli import build_parser               # the same parser the guest will use
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise UserError("cryptcost vm needs a command after --, e.g. "
                        "'cryptcost vm -- storage --stacks luks,dm-null'")
    if any(a == "--db" or a.startswith("--db=") for a in argv):
        raise UserError("the guest keeps its own store; give --db before 'vm' to choose where "
                        "its results are imported")
    if not any(a in ("-h", "--help", "--version") for a in argv):
        inner = build_parser().parse_args(argv)
        if inner.command == "vm":
            raise UserError("cryptcost vm cannot run inside itself")
        if inner.command in ("cleanup", "import"):
            raise UserError(f"'{inner.command}' has no meaning inside the guest")
        if inner.command == "run":
            load(inner.suite, inner.plan)                    # a bad plan costs no boot either
    return argv


def run(args) -> int:
    if args.peer:
        if args.argv[1:] if args.argv[:1] == ["--"] else args.argv:
            raise UserError("cryptcost vm --peer runs no command: drop what follows --")
    elif args.authorized_keys or args.host_key:
        raise UserError("--authorized-keys and --host-key go with --peer")
    argv = [] if args.peer else guest_argv(args.argv)
    opts = VmOptions(timeout=args.timeout, memory_mib=args.memory, cpus=args.cpus, accel=args.accel,
                     kernel=args.kernel,
                     blacklist=tuple(parse_list(args.blacklist,
                                                "module")) if args.blacklist else ())
    opts.validate()
    if os.geteuid() != 0:
        raise UserError("cryptcost vm needs root: the guest reads this host's root "
                        "filesystem as root")
    if args.peer:
        return _serve(args, opts)
    store = open_store(args)
    install_signal_handlers()
    with run_lock(sys.argv[1:]), Resources() as res:
        try:
            outcome = run_guest(res, argv, opts, Path(store.path).parent / "vm-logs")
        except GuestCut as exc:
            ids, said = keep_killed(store, exc)
            if exc.interrupt is not None:       # said, then the interrupt ends it as any other
                print(f"vm: {said}", file=sys.stderr, flush=True)
                raise exc.interrupt from None
            if ids:
                raise CryptcostError(said) from None
            raise
    imported = import_guest_runs(store, outcome.store, outcome.emulated)
    how = outcome.emulated.get("accel", opts.accel)
    why = outcome.emulated.get("accel_why")
    print(f"vm: kernel {outcome.kernel.version} "
          f"({how}{': ' + why if why and why != 'asked for' else ''}), {outcome.seconds:.0f} "
          "s, exit code "
              f"{outcome.returncode}; console log {outcome.console}"
              + (f"; imported as emulated run(s) {', '.join(map(str, imported))}" if imported
                 else ""),
              file=sys.stderr)
    return outcome.returncode


def _serve(args, opts: VmOptions) -> int:
    """``vm --peer``: the guest as an ssh host until --timeout or a signal. It takes no run lock:
    it measures nothing itself; the run that uses it as its peer takes the lock."""
    GuestPeer(args.peer, "-", Path("-")).validate()          # a bad address costs nothing
    keys = _authorized_keys(args.authorized_keys)
    store = open_store(args)
    install_signal_handlers()
    try:
        seconds = _serve_until_stopped(args, opts, keys, store)
    except (KeyboardInterrupt, Terminated) as exc:
        print(f"vm: {exc or 'interrupted'}: the guest is stopped and its link released",
              file=sys.stderr)
        return 0
    print(f"vm: the guest served for {seconds:.0f} s and is stopped", file=sys.stderr)
    return 0


def _serve_until_stopped(args, opts: VmOptions, keys: str, store) -> float:
    with Resources() as res:
        key = Path(args.host_key) if args.host_key else None
        if key is None:
            key = res.keydir() / "ssh_host_key"
            proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "cc-guest",
                      "-f", str(key)], timeout=60)
        elif not key.is_file():
            raise UserError(f"--host-key {key}: no such file")
        peer = GuestPeer(args.peer, keys, key, tap=f"cc-vm{os.getpid()}"[:15])
        peer.validate()
        return serve_peer(res, opts, peer, Path(store.path).parent / "vm-logs",
                          say=lambda line: print(line, file=sys.stderr, flush=True))


def _authorized_keys(path: str | None) -> str:
    if path:
        try:
            return Path(path).read_text()
        except OSError as exc:
            raise UserError(f"cannot read --authorized-keys {path}: {exc.strerror}") from None
    found = sorted(Path.home().glob(".ssh/id_*.pub"))
    if not found:
        raise UserError("cryptcost vm --peer: no ~/.ssh/id_*.pub to let in; name the public "
                        "keys that may log in with --authorized-keys FILE")
    return "".join(f.read_text() for f in found)
