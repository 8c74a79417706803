"""``--link peer:HOST`` for real, as root: a second "host" is a network
namespace of this machine with its own sshd on its own address, reached
over a veth pair from a second namespace where the controller runs; the
worker is this checkout's cryptcost, with a state directory of its own.
Everything crosses ssh as it would between two machines: the session,
the worker's JSON lines, the stack's far end built and released by the
worker, the wire captured at both ends."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail
from tests.system.conftest import leftovers, need_root
from tests.system.keyscan import scan_debug_run

ADDR_A, ADDR_B = "10.206.0.1", "10.206.0.2"


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


@pytest.fixture
def peer(tmp_path):
    """Namespaces ``cc-<tag>-pa`` (the controller's) and ``cc-<tag>-pb`` (the
    peer's, with sshd on ADDR_B:22), an ssh config naming the peer
    ``cc-peer``, and the command that runs cryptcost there."""
    need_root("peer")
    for tool in ("ssh", "sshd", "ssh-keygen"):
        path = "/usr/sbin/sshd" if tool == "sshd" else subprocess.run(
            ["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if not path or not os.path.exists(path):
            skip_or_fail("peer", f"{tool} is not installed (openssh-server, openssh-client)")
    tag = secrets.token_hex(2)
    ns = {"a": f"cc-{tag}-pa", "b": f"cc-{tag}-pb"}
    d = tmp_path / "peer"
    d.mkdir()
    sshd = None
    try:
        for n in ns.values():
            _sh("ip", "netns", "add", n)
        _sh("ip", "-n", ns["a"], "link", "add", f"cc{tag}pa", "type", "veth", "peer", "name",
            f"cc{tag}pb", "netns", ns["b"])
        for end, addr in (("a", ADDR_A), ("b", ADDR_B)):
            _sh("ip", "-n", ns[end], "addr", "add", f"{addr}/30", "dev", f"cc{tag}p{end}")
            _sh("ip", "-n", ns[end], "link", "set", f"cc{tag}p{end}", "up")
            _sh("ip", "-n", ns[end], "link", "set", "lo", "up")
        for key in ("host", "client"):
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key))
        (d / "authorized_keys").write_text((d / "client.pub").read_text())
        (d / "sshd_config").write_text("\n".join([
            "Port 22", f"ListenAddress {ADDR_B}", f"HostKey {d / 'host'}",
            f"AuthorizedKeysFile {d / 'authorized_keys'}", "PermitRootLogin prohibit-password",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
            "StrictModes no", "PidFile none"]) + "\n")
        (d / "known_hosts").write_text(f"{ADDR_B} {(d / 'host.pub').read_text()}")
        (d / "ssh_config").write_text("\n".join([
            "Host cc-peer", f"  HostName {ADDR_B}", "  User root", f"  IdentityFile {d / 'client'}",
            f"  UserKnownHostsFile {d / 'known_hosts'}", "  StrictHostKeyChecking yes"]) + "\n")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "CRYPTCOST_RUN"}
        sshd = subprocess.Popen(["ip", "netns", "exec", ns["b"], "/usr/sbin/sshd", "-D", "-e", "-f",
                                 str(d / "sshd_config")], stdout=subprocess.DEVNULL,
                                stderr=open(d / "sshd.log", "wb"), env=env)
        deadline = time.monotonic() + 20
        while subprocess.run(["ip", "netns", "exec", ns["b"], "ss", "-Hltn", "sport = :22"],
                             capture_output=True, text=True).stdout.strip() == "":
            assert time.monotonic() < deadline, (d / "sshd.log").read_text()
            time.sleep(0.1)
        state = tmp_path / "peerhost" / "state"          # the peer's own state directory
        state.mkdir(parents=True)
        yield {"ns": ns, "dir": d, "state": state, "config": str(d / "ssh_config"),
               "command": f"CRYPTCOST_STATE_DIR={state} {sys.executable} -m cryptcost"}
    finally:
        if sshd is not None:
            sshd.terminate()
            sshd.wait(timeout=10)
        for n in ns.values():
            subprocess.run(["ip", "netns", "delete", n], capture_output=True, timeout=30)


def _left(peer, tmp_path) -> list[str]:
    """What either side left (the fixture's own two namespaces aside)."""
    ours = {f"netns {n}" for n in peer["ns"].values()}
    return [x for x in leftovers([str(peer["state"]), str(tmp_path / "state")]) if x not in ours]


def _controller(peer, tmp_path, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
           "CRYPTCOST_STATE_DIR": str(tmp_path / "state")}
    env.pop("CRYPTCOST_RUN", None)
    argv = ["ip", "netns", "exec", peer["ns"]["a"], sys.executable, "-m", "cryptcost", "network",
            "--link", "peer:cc-peer", "--ssh-config", peer["config"],
            "--peer-command", peer["command"], *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=tmp_path, **kw)


@pytest.mark.root
def test_a_peer_over_ssh_holds_end_b_is_measured_wire_checked_and_released(peer, tmp_path):
    """tls, ssh and wireguard between the controller and a peer reached with ssh:
    measured against plain TCP over the same link, each end's daemons'
    CPU counted by that end, the wire captured at both ends, the peer's
    fingerprint and the link's route and round trip recorded, and nothing
    left on either side."""
    child = _controller(peer, tmp_path, "--stacks", "tls,ssh,wireguard", "--workloads", "send",
                        "--seconds", "1", "--min-samples", "2", "--max-samples", "2", "--json")
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0, err[-3000:]
    results = json.loads(out)["results"]
    by = {r["stack"].split(":")[0]: r for r in results}
    assert set(by) == {"tls", "ssh", "wireguard", "tcp"}, err
    for name in ("tls", "ssh", "wireguard"):
        r = by[name]
        assert r["role"] == "measured" and r["baseline"] == "tcp" and r["overhead"] is not None
        assert r["link"] == "peer" and r["peer"] == "cc-peer", r
        assert r["wire"]["verdict"] == "encrypted" and r["wire"]["packets"] > 0, r["wire"]
        daemons = r["daemon_cpu_s_per_gb"]
        at_b = [k for k in daemons if k.endswith("@b")]
        assert at_b and all(daemons[k] > 0 for k in at_b), daemons      # counted by the worker
        assert r["cpu_s_per_gb"]["b"] > 0
    link = by["tls"]["params"]["link"]
    assert link["host"] == "cc-peer" and link["addresses"] == {"a": ADDR_A, "b": ADDR_B}
    assert link["routes"]["b"]["src"] == ADDR_B and link["rtt_ms"] > 0
    assert link["peer"]["kernel"] and link["peer"]["crypto_flags"] and link["peer"]["boot_id"]
    assert link["shared_cpus"].startswith("the peer is this machine"), link
    assert by["tls"]["shared_cpus"] is True                # so the report reads CPU-s/GB, not Gbit/s
    assert by["tls"]["params"]["negotiated"]["suite"] == "TLS_AES_128_GCM_SHA256"
    assert by["wireguard"]["params"]["negotiated"]["handshake"] is True
    assert _left(peer, tmp_path) == []
    assert os.listdir(peer["state"]) == ["lock"]           # the worker's journal, released and gone


@pytest.mark.root
def test_a_controller_killed_mid_run_leaves_nothing_on_the_peer(peer, tmp_path):
    """SIGKILL to the controller while it measures: the session's ssh reads
    the end of its input, the worker reads the end of its own and releases
    every resource of end b (daemons, directories, key tmpfs); ``cleanup``
    on this host releases the rest."""
    child = _controller(peer, tmp_path, "--stacks", "tls", "--workloads", "send", "--seconds",
                        "2", "--min-samples", "8", "--max-samples", "8",
                        start_new_session=True)
    journal = _wait_for_measuring(peer, child)
    time.sleep(2)                                          # into the measurement
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    deadline = time.monotonic() + 60
    while journal.exists():
        assert time.monotonic() < deadline, journal.read_text()
        time.sleep(0.2)
    env = {**os.environ, "CRYPTCOST_STATE_DIR": str(tmp_path / "state")}
    env.pop("CRYPTCOST_RUN", None)
    subprocess.run([sys.executable, "-m", "cryptcost", "cleanup"], capture_output=True, text=True,
                   env=env, timeout=300, check=True)
    deadline = time.monotonic() + 30
    while _left(peer, tmp_path):
        assert time.monotonic() < deadline, _left(peer, tmp_path)
        time.sleep(0.5)


def _worker_pid(peer) -> int | None:
    """The worker serving this test's peer (its state directory names it)."""
    mark = f"CRYPTCOST_STATE_DIR={peer['state']}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            env = open(f"/proc/{pid}/environ", "rb").read()
        except OSError:
            continue
        if b"worker" in cmd.split(b"\0") and mark in env.split(b"\0"):
            return int(pid)
    return None


def _wait_for_measuring(peer, child) -> Path:
    """The peer's journal, once stunnel runs there (the run is measuring)."""
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline and child.poll() is None, child.stderr.read()
        found = [p for p in peer["state"].iterdir() if p.name.startswith("journal-")]
        text = found[0].read_text() if found else ""
        if '"daemon"' in text and "stunnel4" in text:
            return found[0]
        time.sleep(0.2)


@pytest.mark.root
def test_a_worker_terminated_mid_run_releases_end_b_and_the_run_fails_keeping_its_results(
        peer, tmp_path):
    """SIGTERM to the worker while the run measures: it releases everything
    it held on the peer by itself; the controller's next request finds the
    session ended, the configurations still to measure fail with that
    reason, the run ends (exit 1) keeping what it measured, and nothing is
    left on either side without any cleanup."""
    child = _controller(peer, tmp_path, "--stacks", "tls", "--workloads", "send", "--seconds",
                        "2", "--min-samples", "8", "--max-samples", "8", "--json")
    journal = _wait_for_measuring(peer, child)
    time.sleep(3)
    os.kill(_worker_pid(peer), signal.SIGTERM)
    out, err = child.communicate(timeout=300)
    assert child.returncode == 1, err
    assert "the session to cc-peer ended" in err, err
    assert not journal.exists()                       # released by the worker itself
    assert _left(peer, tmp_path) == []


@pytest.mark.root
def test_a_peer_that_cannot_start_the_worker_is_one_line_and_exit_2(peer, tmp_path):
    """A peer without cryptcost (here: a command that does not exist) fails the
    run at once, saying what to check, before any stack is built."""
    bad = _controller({**peer, "command": "/nonexistent/cryptcost"}, tmp_path, "--stacks", "tls",
                      "--workloads", "send")
    out, err = bad.communicate(timeout=120)
    assert bad.returncode == 2, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error: --link peer:cc-peer: ssh could not start"), err
    assert "Traceback" not in err
    assert _left(peer, tmp_path) == []


@pytest.mark.root
def test_no_key_reaches_any_output_on_either_host(peer, tmp_path):
    """The keys of tls, ssh and wireguard at both ends (read from both hosts'
    key tmpfs while the run measures): none in the controller's output,
    store, report or journal, nor in the worker's debug log or the peer's
    journal, nor in any command line on either side."""
    secrets_, found, everything = scan_debug_run(
        tmp_path, ["network", "--link", "peer:cc-peer", "--ssh-config", peer["config"],
                   "--peer-command", peer["command"].replace("-m cryptcost", "-m cryptcost --debug"),
                   "--stacks", "tls,ssh,wireguard", "--workloads", "send", "--seconds", "1",
                   "--min-samples", "1", "--max-samples", "1", "--warmup", "0", "--json"],
        prefix=["ip", "netns", "exec", peer["ns"]["a"]], states=[peer["state"]],
        logs="/tmp/cryptcost-peer-*/ssh.log")
    assert len(secrets_) >= 4, "read no key material during the run"
    assert b"DEBUG cryptcost" in everything["logs"], "the worker's debug log was not read"
    assert not found, found
    assert _left(peer, tmp_path) == []
