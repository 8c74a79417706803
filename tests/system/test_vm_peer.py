"""A second host with a kernel of its own: ``cryptcost vm --peer`` boots
Debian's stock kernel as an ssh host on a tap link, in a ``cc-`` namespace
of this machine where the controller runs too; ``cryptcost network --link
peer:`` then holds end b in the guest. The guest's kernel has what this
host's lacks, so end b runs kernel WireGuard and kernel ESP while end a
runs wireguard-go and strongSwan's kernel-libipsec, each checked on the
wire; nothing is left in the guest or here, and a signal stops the guest.
(Marker ``vm_matrix``: CI's second step.)"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import skip_or_fail
from tests.system.conftest import leftovers
from tests.system.test_vm import _vm_ready

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


def test_the_guest_as_a_peer_holds_kernel_wireguard_and_esp_at_end_b(tmp_path):
    _vm_ready()
    for tool in ("ssh", "ssh-keygen", "/usr/sbin/sshd"):
        if not (os.path.exists(tool) or subprocess.run(["sh", "-c", f"command -v {tool}"],
                                                       capture_output=True).returncode == 0):
            skip_or_fail("vm", f"{tool} is not installed (openssh-server, openssh-client)")
    ns = f"cc-{secrets.token_hex(2)}-vmp"
    for name in ("client", "hostkey"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / name)],
                       check=True, timeout=60)
    (tmp_path / "known_hosts").write_text(f"{GUEST} {(tmp_path / 'hostkey.pub').read_text()}")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host cc-guest\n  HostName {GUEST}\n  User root\n"
                      f"  IdentityFile {tmp_path / 'client'}\n  IdentitiesOnly yes\n"
                      f"  UserKnownHostsFile {tmp_path / 'known_hosts'}\n"
                      "  StrictHostKeyChecking yes\n")
    env = {k: v for k, v in os.environ.items() if k != "CRYPTCOST_RUN"}
    vm_env = {**env, "CRYPTCOST_STATE_DIR": str(tmp_path / "vmstate"),
              "XDG_DATA_HOME": str(tmp_path / "vmdata")}
    env.update(CRYPTCOST_STATE_DIR=str(tmp_path / "state"), XDG_DATA_HOME=str(tmp_path / "data"))
    cc = [sys.executable, "-m", "cryptcost"]
    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=30)
    vm = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True, timeout=30)
        vm = subprocess.Popen(["ip", "netns", "exec", ns, *cc, "vm", "--timeout", "1500", "--peer",
                               f"{GUEST}/24", "--authorized-keys", str(tmp_path / "client.pub"),
                               "--host-key", str(tmp_path / "hostkey")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=vm_env)
        up = _up(vm, 600)
        assert f"ssh root@{GUEST}" in up and "this host is 10.209.0.1/24" in up, up
        done = subprocess.run(
            ["ip", "netns", "exec", ns, *cc, "network", "--link", "peer:cc-guest",
             "--ssh-config", str(config), "--peer-command", " ".join(cc),
             "--stacks", "wireguard,ipsec:aes128gcm16", "--workloads", "send", "--seconds", "2",
             "--min-samples", "2", "--max-samples", "2", "--page-reporting", "keep", "--json"],
            capture_output=True, text=True, env=env, timeout=1200, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        results = {r["stack"]: r for r in json.loads(done.stdout)["results"]}
        impl = {s: results[s]["params"].get("implementation") for s in results}
        assert impl["wireguard"] == "a: wireguard-go, b: kernel", impl
        assert impl["ipsec:aes128gcm16"] == "a: kernel-libipsec, b: kernel ESP", impl
        for stack in ("wireguard", "ipsec:aes128gcm16"):
            r = results[stack]
            assert r["wire"]["verdict"] == "encrypted", (stack, r["wire"])
            assert r["median_bytes_per_s"] > 0 and r["cpu_s_per_gb"]["b"] > 0, r
            assert "qemu guest" in r["emulated_peer"], r.get("emulated_peer")
            peer = r["params"]["link"]["peer"]
            assert peer["hostname"] == "cc-guest" and peer["kernel"] != os.uname().release
        assert results["tcp"]["wire"]["verdict"] == "plaintext"
        report = subprocess.run([*cc, "report", "latest", "--format", "json"], capture_output=True,
                                text=True, env=env, timeout=300, check=True)
        findings = json.loads(report.stdout)["analysis"]["findings"]
        assert any("is cryptcost vm's guest" in f for f in findings), findings
        # nothing left at end b: no journal, no tunnel, no daemon, no SA
        left = subprocess.run(
            ["ip", "netns", "exec", ns, "ssh", "-F", str(config), "-o", "BatchMode=yes", "cc-guest",
             "ls /run/cryptcost | grep journal-; ip -br link | grep -v '^lo\\|^eth0';"
             " pgrep -a 'charon|iperf3|wireguard'; ip xfrm state"],
            capture_output=True, text=True, timeout=120)
        assert left.returncode in (0, 1) and left.stdout.strip() == "", left.stdout
        # a signal stops the guest: the vm ends at once, its tap and its journal gone
        vm.send_signal(signal.SIGTERM)
        assert vm.wait(timeout=120) in (0, 1, 143), vm.stderr.read()[-2000:]
        links = subprocess.run(["ip", "-n", ns, "-br", "link"], capture_output=True, text=True,
                               timeout=30).stdout
        assert "cc-vm" not in links, links
        assert leftovers([str(tmp_path / "state"), str(tmp_path / "vmstate")]) == [f"netns {ns}"]
    finally:
        if vm is not None and vm.poll() is None:
            vm.kill()
            vm.wait(timeout=60)
        subprocess.run(["ip", "netns", "del", ns], timeout=30)
