"""``cryptcost vm --peer``: the guest as a host reached over ssh, for ``--link peer:``.

The guest boots as for a command (:mod:`cryptcost.guest`), with a virtio network device
on a tap link to this host (in the namespace ``vm --peer`` runs in), brings it up at the address
asked for, and runs sshd there: root by the given keys only, the host key given, the worker's tool
versions known from this host's. It serves until the timeout or a signal, which stops qemu and
releases the link. Its runs (a worker's) know they are emulated (``/run/cryptcost-emulated.json``).
"""

from __future__ import annotations

import ipaddress
import os
import time
from dataclasses import dataclass
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import CryptcostError, UserError
from cryptcost.host import tools
from cryptcost.lifecycle.resources import Resources
from cryptcost.guest import (XCHG, VmOptions, failure_cause, guest_script, keep_log,
                                    prepare)


@dataclass(frozen=True)
class GuestPeer:
    """The guest as a host reached over ssh (``cryptcost vm --peer``): its address on a tap
    link to this host, its sshd's host key (a private key file) and who may log in as root."""

    address: str                                     # the guest's, with its prefix: 10.0.0.2/24
    authorized_keys: str                             # public keys, one per line
    host_key: Path
    tap: str = ""                                    # this host's side; named from the pid

    @property
    def host_address(self) -> str:
        """This host's address on the tap: the subnet's first other than the guest's."""
        iface = ipaddress.ip_interface(self.address)
        mine = next(a for a in iface.network.hosts() if a != iface.ip)
        return f"{mine}/{iface.network.prefixlen}"

    def validate(self) -> None:
        try:
            iface = ipaddress.ip_interface(self.address)
        except ValueError:
            raise UserError(f"--peer {self.address}: give the guest's address with its prefix, "
                            "e.g. 10.0.0.2/24") from None
        if iface.version != 4 or iface.network.num_addresses < 4:
            raise UserError(f"--peer {self.address}: an IPv4 address in a /30 or wider")
        if not self.authorized_keys.strip():
            raise UserError("--authorized-keys names no public key: nobody could log in")


def peer_body(peer: GuestPeer) -> str:
    """What the guest runs instead of a command: its network, then sshd, until stopped."""
    return f"""modprobe -q virtio_net
dev=$(ls /sys/class/net | grep -v '^lo$' | head -n 1)
if [ -z "$dev" ]; then
  echo "cc-guest: FAILED: no network device" > /dev/console
  echo o > /proc/sysrq-trigger
fi
ip addr add {peer.address} dev "$dev" && ip link set "$dev" up
mkdir -p /run/sshd && chmod 0755 /run/sshd
/usr/sbin/sshd -f {XCHG}/sshd_config -E {XCHG}/sshd.log \\
  || echo "cc-guest: FAILED: sshd did not start" > /dev/console
echo "cc-guest: serving ssh on $dev" > /dev/console
: > {XCHG}/ready
while :; do sleep 3600; done
"""


def sshd_config(peer: GuestPeer) -> str:
    """The guest's sshd: on its tap address only, root by key only, the worker's tool versions
    known from the host's."""
    ip = str(ipaddress.ip_interface(peer.address).ip)
    return "\n".join([
        f"ListenAddress {ip}", f"HostKey {XCHG}/ssh_host_key",
        f"AuthorizedKeysFile {XCHG}/authorized_keys", "PermitRootLogin prohibit-password",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
        "StrictModes no", "PidFile /run/sshd.pid", "PrintMotd no", "AcceptEnv none",
        f"SetEnv {tools.KNOWN}={XCHG}/tools.json PYTHONDONTWRITEBYTECODE=1", ""])


# how long the guest may take to boot to its sshd (TCG boots in about a minute on 2 cores)
PEER_BOOT_SECONDS = 600


def serve_peer(res: Resources, opts: VmOptions, peer: GuestPeer, log_dir: Path,
               say=print) -> float:
    """Boot the guest as a host reached over ssh on a tap link (``peer``), say so, and keep it
    until ``opts.timeout`` or a signal (which :class:`Resources` turns into the guest's stop).
    Returns how long it served. Raises :class:`CryptcostError` (console log kept) when it does
    not come up."""
    peer.validate()
    proc.require("sshd", "openssh-server")
    boot = prepare(res, opts, log_dir)
    xchg = boot.xchg
    (xchg / "guest.sh").write_text(guest_script([], "/", boot.emulated, peer_body(peer)))
    (xchg / "sshd_config").write_text(sshd_config(peer))
    (xchg / "authorized_keys").write_text(peer.authorized_keys.strip() + "\n")
    key = xchg / "ssh_host_key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(peer.host_key.read_bytes())
    start = time.monotonic()
    qemu = res.daemon(boot.qemu(peer.tap), logfile=str(boot.work / "qemu.log"))
    try:
        _wait(lambda: Path("/sys/class/net", peer.tap).exists(), qemu, 60, "its tap device")
        res.track("address", lambda e: proc.run(["ip", "addr", "add", peer.host_address, "dev",
                                                 peer.tap], timeout=30),
                  cidr=peer.host_address, dev=peer.tap,
                  undo=["ip", "addr", "del", peer.host_address, "dev", peer.tap])
        proc.run(["ip", "link", "set", peer.tap, "up"], timeout=30)
        _wait(lambda: (xchg / "ready").exists(), qemu, PEER_BOOT_SECONDS, "its sshd")
        ip = ipaddress.ip_interface(peer.address).ip
        finger = proc.run(["ssh-keygen", "-l", "-f", str(key)], timeout=30, check=False)
        say(f"vm: the guest (kernel {boot.kernel.version}, {boot.opts.accel}) is up in "
            f"{time.monotonic() - start:.0f} s: ssh root@{ip} (host key "
            f"{' '.join(finger.stdout.split()[:2]) or '?'}); this host is {peer.host_address} "
            f"on {peer.tap}; it stops after {opts.timeout:g} s, or on Ctrl-C")
        while qemu.alive() and time.monotonic() - start < opts.timeout:
            time.sleep(0.5)
        if not qemu.alive():
            raise CryptcostError(f"the guest stopped: "
                                 f"{failure_cause(boot.console.read_text(errors='replace'))} "
                                 f"(console log: {boot.kept})")
        res.stop(qemu, timeout=5)
    finally:
        keep_log(boot.kept, boot.console, boot.work / "qemu.log", xchg / "sshd.log")
    return time.monotonic() - start


def _wait(ready, qemu, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if not qemu.alive():
            raise CryptcostError(f"the guest stopped before {what} was up (exit "
                                 f"{qemu.returncode}): {qemu.output().strip()[-300:]}")
        if time.monotonic() > deadline:
            raise CryptcostError(f"the guest did not bring up {what} within {seconds:g} s")
        time.sleep(0.2)
