"""A second host with a kernel of its own: ``cryptcost vm --peer`` boots
Debian's stock kernel as an ssh host on a tap link, in a ``cc-`` namespace
of this machine where the controller runs too; ``cryptcost network --link
peer:`` then holds end b in the guest. The guest's kernel has what this
host's lacks, so end b runs kernel WireGuard and kernel ESP while end a
runs wireguard-go and strongSwan's kernel-libipsec, each checked on the
wire; nothing is left in the guest or here, and a signal stops the guest.
(Marker ``vm_matrix``: CI's second step.) Its boot is one of the step's
guest boots (``tests/system/test_vm_matrix.boot_all``), at one vCPU: it asserts
no figure's size, only that both ends moved data, encrypted where they should."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.vm_matrix]
GUEST = "10.209.0.2"


def _up(vm: subprocess.Popen, seconds: float) -> str:
    """The vm's line that says the guest is up (its stderr, read as it comes)."""
    deadline = time.monotonic() + seconds
    seen = []
    while time.monotonic() < deadline:
        line = vm.stderr.readline()
        if not line:
            break
        seen.append(line)
        if " is up in " in line:
            return line
    raise AssertionError("the guest did not come up: " + "".join(seen)[-3000:])


@dataclass
class Peer:
    """What the guest as a peer left to read: the network run, its report's findings, what was
    left at end b, how the vm ended on a signal, and its namespace's links after."""

    done: subprocess.CompletedProcess
    findings: list[str]
    end_b: subprocess.CompletedProcess
    vm_end: int
    vm_said: str
    links: str


def boot_peer(tmp: Path) -> Peer:
    """The guest as a peer at one vCPU, the network run through it, and its end on a signal;
    boot_all checks after every boot of the step that nothing of cryptcost is left here (the
    namespace deleted, no journal in ``state`` or ``vmstate``)."""
    for tool in ("ssh", "ssh-keygen", "/usr/sbin/sshd"):
        if not (os.path.exists(tool) or subprocess.run(["sh", "-c", f"command -v {tool}"],
                                                       capture_output=True).returncode == 0):
            skip_or_fail("vm", f"{tool} is not installed (openssh-server, openssh-client)")
    ns = f"cc-{secrets.token_hex(2)}-vmp"
    for name in ("client", "hostkey"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / name)],
                       check=True, timeout=60)
    (tmp / "known_hosts").write_text(f"{GUEST} {(tmp / 'hostkey.pub').read_text()}")
    config = tmp / "ssh_config"
    config.write_text(f"Host cc-guest\n  HostName {GUEST}\n  User root\n"
                      f"  IdentityFile {tmp / 'client'}\n  IdentitiesOnly yes\n"
                      f"  UserKnownHostsFile {tmp / 'known_hosts'}\n"
                      "  StrictHostKeyChecking yes\n")
    env = {k: v for k, v in os.environ.items() if k != "CRYPTCOST_RUN"}
    vm_env = {**env, "CRYPTCOST_STATE_DIR": str(tmp / "vmstate"),
              "XDG_DATA_HOME": str(tmp / "vmdata")}
    env.update(CRYPTCOST_STATE_DIR=str(tmp / "state"), XDG_DATA_HOME=str(tmp / "data"))
    cc = [sys.executable, "-m", "cryptcost"]
    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=30)
    vm = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True, timeout=30)
        vm = subprocess.Popen(["ip", "netns", "exec", ns, *cc, "vm", "--timeout", "1500",
                               "--cpus", "1", "--peer", f"{GUEST}/24",
                               "--authorized-keys", str(tmp / "client.pub"),
                               "--host-key", str(tmp / "hostkey")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=vm_env)
        up = _up(vm, 600)
        assert f"ssh root@{GUEST}" in up and "this host is 10.209.0.1/24" in up, up
        done = subprocess.run(
            ["ip", "netns", "exec", ns, *cc, "network", "--link", "peer:cc-guest",
             "--ssh-config", str(config), "--peer-command", " ".join(cc),
             "--stacks", "wireguard,ipsec:aes128gcm16", "--workloads", "send", "--seconds", "2",
             "--min-samples", "2", "--max-samples", "2", "--page-reporting", "keep", "--json"],
            capture_output=True, text=True, env=env, timeout=1200, cwd=tmp)
        assert done.returncode == 0, done.stderr[-3000:]
        report = subprocess.run([*cc, "report", "latest", "--format", "json"], capture_output=True,
                                text=True, env=env, timeout=300, check=True)
        # what is left at end b: a journal, a tunnel, a daemon, an SA
        end_b = subprocess.run(
            ["ip", "netns", "exec", ns, "ssh", "-F", str(config), "-o", "BatchMode=yes", "cc-guest",
             "ls /run/cryptcost | grep journal-; ip -br link | grep -v '^lo\\|^eth0';"
             " pgrep -a 'charon|iperf3|wireguard'; ip xfrm state"],
            capture_output=True, text=True, timeout=120)
        # a signal stops the guest
        vm.send_signal(signal.SIGTERM)
        vm_end = vm.wait(timeout=120)
        links = subprocess.run(["ip", "-n", ns, "-br", "link"], capture_output=True, text=True,
                               timeout=30).stdout
        return Peer(done, json.loads(report.stdout)["analysis"]["findings"], end_b, vm_end,
                    vm.stderr.read()[-2000:], links)
    finally:
        if vm is not None and vm.poll() is None:
            vm.kill()
            vm.wait(timeout=60)
        subprocess.run(["ip", "netns", "del", ns], timeout=30)


@pytest.fixture(scope="module")
def peer(guest_boots) -> Peer:
    return guest_boots.read("peer")


def test_the_guest_as_a_peer_holds_kernel_wireguard_and_esp_at_end_b(peer):
    results = {r["stack"]: r for r in json.loads(peer.done.stdout)["results"]}
    impl = {s: results[s]["params"].get("implementation") for s in results}
    assert impl["wireguard"] == "a: wireguard-go, b: kernel", impl
    assert impl["ipsec:aes128gcm16"] == "a: kernel-libipsec, b: kernel ESP", impl
    for stack in ("wireguard", "ipsec:aes128gcm16"):
        r = results[stack]
        assert r["wire"]["verdict"] == "encrypted", (stack, r["wire"])
        assert r["median_bytes_per_s"] > 0 and r["cpu_s_per_gb"]["b"] > 0, r
        assert "qemu guest" in r["emulated_peer"], r.get("emulated_peer")
        link = r["params"]["link"]["peer"]
        assert link["hostname"] == "cc-guest" and link["kernel"] != os.uname().release
    assert results["tcp"]["wire"]["verdict"] == "plaintext"
    assert any("is cryptcost vm's guest" in f for f in peer.findings), peer.findings
    # nothing left at end b: no journal, no tunnel, no daemon, no SA
    assert peer.end_b.returncode in (0, 1) and peer.end_b.stdout.strip() == "", peer.end_b.stdout
    # a signal stops the guest: the vm ends at once, its tap gone (and, boot_all checks, its
    # journal and everything else of cryptcost's here)
    assert peer.vm_end in (0, 1, 143), peer.vm_said
    assert "cc-vm" not in peer.links, peer.links
