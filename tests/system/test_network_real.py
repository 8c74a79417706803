"""Every network stack, for real as root: built between two namespaces,
measured against its baseline, its negotiated suite read back, every sample
checked on the wire, and nothing left behind. Plus the faults: a tunnel
daemon killed mid-measurement, and `kill -9` followed by `cleanup`."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cryptcost import stacks
from cryptcost.stacks import get, unavailable_reason
from tests.conftest import cli_in, skip_or_fail
from tests.system.conftest import leftovers, need_root
from tests.system.keyscan import scan_debug_run, secrets_in

# Every measured network stack in the registry, with the workload it is checked on.
CASES = {name: ("put" if cls.traffic == "files" else "send")
         for name, cls in stacks.of_kind("network").items() if cls.role == "measured"}
DAEMONS = ("stunnel4", "sshd", "ssh", "wireguard-go", "charon-systemd", "smbd", "iperf3", "tcpdump")


def _available(name: str) -> None:
    need_root(name)
    exc = unavailable_reason(get(name))
    if exc:
        skip_or_fail(name, f"{name} unavailable: {exc}")


def _namespaces() -> set[str]:
    return (
        {n for n in os.listdir("/run/netns") if n.startswith("cc-")}
        if os.path.isdir("/run/netns")
        else set()
    )


@pytest.fixture(scope="module")
def every_network_stack(tmp_path_factory):
    """One network run of every measured stack available here on its workload (send for a
    tunnel, put for a file share), two samples each, against plain TCP on the same link: set
    up, measured, wire-checked and released once for the module, each baseline once, and read
    by every stack's test. A stack that fails in it fails its own test, not the others'."""
    need_root(*CASES)
    tmp = tmp_path_factory.mktemp("every-network-stack")
    cli = cli_in(tmp)
    before = set(leftovers([]))
    runs = {}
    for workload in sorted(set(CASES.values())):
        names = [n for n, w in sorted(CASES.items())
                 if w == workload and not unavailable_reason(get(n))]
        if not names:
            continue
        done = cli("network", "--stacks", ",".join(names), "--workloads", workload,
                   "--seconds", "1", "--file-size", "32M", "--min-samples", "2",
                   "--max-samples", "2", "--json", timeout=900)
        assert done.returncode in (0, 1) and done.stdout.startswith("{"), done.stderr[-3000:]
        runs[workload] = (json.loads(done.stdout), done.stderr)
    time.sleep(0.5)
    left = set(leftovers([str(tmp / "state")])) - before
    return runs, left


@pytest.mark.root
@pytest.mark.parametrize("stack", sorted(CASES))
def test_network_stack_measured_verified_and_released(every_network_stack, stack):
    _available(stack)
    workload = CASES[stack]
    runs, left = every_network_stack
    out, stderr = runs[workload]
    failed = [f for f in out["failed"] if f.startswith(stack)]
    assert not failed, failed
    mine = [
        r for r in out["results"] if r["stack"].split(":")[0] == stack and r["role"] == "measured"
    ]
    assert mine, f"no result for {stack}: " + stderr[-2000:]
    r = mine[0]
    base = [x for x in out["results"] if x["role"] == "baseline" and x["stack"] == r["baseline"]]
    assert base, out
    assert r["kind"] == "network" and r["workload"] == workload and r["samples"] == 2
    assert (
        r["median_bytes_per_s"] > 0 and len(r["values"]) == 2 and all(r["bytes_moved_per_sample"])
    )
    assert r["overhead"] is not None and r["baseline"] == base[0]["stack"] and r["vs"]
    per_gb = r["cpu_s_per_gb"]
    assert per_gb["a"] > 0 and per_gb["b"] >= 0 and per_gb["system"] > 0
    if stack != "tcp":
        assert r["daemon_cpu_s_per_gb"] and all(
            n.endswith(("@a", "@b")) for n in r["daemon_cpu_s_per_gb"]
        )
    assert r["params"]["negotiated"], "the stack read back nothing it negotiated"
    assert r["params"]["facts"]["kind"] == "network" and r["params"]["facts"]["use_case"]
    # the wire check: encrypted on every sample, and the canary never seen in plaintext …
    assert r["wire"]["verdict"] == "encrypted", r["wire"]
    assert r["wire"]["packets"] >= 300 and r["wire"]["entropy_bits_per_byte"] > 7
    assert (
        r["wire"]["canary"]["verdict"] == "encrypted" and r["wire"]["canary"]["canary_packets"] == 0
    )
    # … while the same check sees the baseline's plaintext (it can fail)
    assert (
        base[0]["wire"]["verdict"] == "plaintext"
        and base[0]["wire"]["canary"]["verdict"] == "plaintext"
    )
    assert r["link"] == "netns" and r["params"]["link"]["offloads"]["a"]
    assert left == set()


@pytest.mark.root
def test_ssh_negotiates_exactly_the_cipher_and_mac_asked_for(cli):
    _available("ssh")
    done = cli(
        "network", "--stacks", "ssh:aes128-ctr-sha256", "--seconds", "1", "--min-samples", "1",
        "--max-samples", "1", "--warmup", "0", "--json", timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    [r] = [r for r in json.loads(done.stdout)["results"] if r["stack"].startswith("ssh")]
    assert r["params"]["negotiated"]["cipher"] == "aes128-ctr"
    assert r["params"]["negotiated"]["mac"] == "hmac-sha2-256-etm@openssh.com"


@pytest.mark.root
def test_smb3_checks_every_file_it_moves(cli):
    _available("smb3")
    done = cli(
        "network", "--stacks", "smb3:aes-256-gcm", "--workloads", "get,smallfiles,dbench",
        "--file-size", "16M", "--min-samples", "1", "--max-samples", "1", "--warmup", "0",
        "--json", timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout)["results"]
    # smbclient copies and mounts nothing: dbench, which runs in a directory, is skipped with why
    skipped = [s for s in json.loads(done.stdout)["skipped"] if s.get("workload") == "dbench"]
    assert {s["stack"] for s in skipped} == {"smb3:aes-256-gcm", "smb3:off"}, skipped
    assert all("mounts nothing" in s["reason"] for s in skipped)
    enc = {r["workload"]: r for r in results if r["stack"] == "smb3:aes-256-gcm"}
    assert set(enc) == {"get", "smallfiles"}
    assert enc["get"]["params"]["negotiated"]["cipher"] == "AES-256-GCM"
    assert (
        enc["smallfiles"]["files_per_s"] > 0 and enc["smallfiles"]["bytes_moved"] % (64 << 10) == 0
    )
    off = [r for r in results if r["stack"] == "smb3:off"]
    assert off and all(r["wire"]["verdict"] == "plaintext" for r in off)


def _pids(name: str, pattern: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = (
                    open(f"/proc/{pid}/cmdline", "rb")
                    .read()
                    .decode(errors="replace")
                    .replace("\0", " ")
                )
            except OSError:
                continue
            if cmd.split(" ")[0].endswith(name) and pattern in cmd:
                found.append(int(pid))
    return found


@pytest.mark.root
def test_a_tunnel_daemon_killed_mid_measurement_fails_its_configuration_only(tmp_path):
    _available("tls")
    _available("ssh")
    env = {
        **os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
        "CRYPTCOST_STATE_DIR": str(tmp_path / "state"),
    }
    child = subprocess.Popen(
        [
            sys.executable, "-m", "cryptcost", "network", "--stacks", "tls,ssh", "--seconds", "1",
            "--min-samples", "3", "--max-samples", "3", "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(iter(child.stderr.readline, "")), daemon=True
    )
    reader.start()
    deadline = time.monotonic() + 120
    killed = None
    while time.monotonic() < deadline and killed is None:
        measuring = any("measuring:" in line for line in lines)  # setup and canaries are done
        victims = (
            _pids("stunnel4", "stunnel-b.conf") if measuring and _pids("iperf3", "-J -c") else []
        )
        if victims:
            os.kill(victims[0], signal.SIGKILL)
            killed = victims[0]
        time.sleep(0.05)
    out = child.stdout.read()
    child.wait(timeout=600)
    reader.join(timeout=10)
    err = "".join(lines)
    assert killed, "never saw the measurement start"
    assert child.returncode == 1, err[-2000:]
    data = json.loads(out)
    assert any(f.startswith("tls") and "stunnel4 at end b exited" in f for f in data["failed"]), (
        data["failed"]
    )
    assert [r for r in data["results"] if r["stack"].startswith("ssh") and r["samples"] == 3], (
        "ssh did not go on"
    )
    assert set(leftovers([str(tmp_path / "state")])) <= set(leftovers([]))


@pytest.mark.root
def test_kill_9_of_a_network_run_then_cleanup_leaves_nothing(tmp_path):
    _available("wireguard")
    _available("tls")
    before_ns = _namespaces()
    env = {
        **os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
        "CRYPTCOST_STATE_DIR": str(tmp_path / "state"),
    }
    child = subprocess.Popen(
        [
            sys.executable, "-m", "cryptcost", "network", "--stacks", "wireguard,tls", "--seconds",
            "2", "--min-samples", "5", "--max-samples", "5",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        _pids("wireguard-go", "") and _pids("stunnel4", "cryptcost-")
    ):
        time.sleep(0.1)
    time.sleep(1)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert _namespaces() - before_ns, "the run had built no namespaces before it was killed"
    done = subprocess.run(
        [sys.executable, "-m", "cryptcost", "cleanup"], capture_output=True, text=True, env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert _namespaces() == before_ns
    assert not _pids("wireguard-go", "") and not _pids("stunnel4", "cryptcost-")
    assert set(leftovers([str(tmp_path / "state")])) <= set(leftovers([]))
    again = subprocess.run(
        [sys.executable, "-m", "cryptcost", "cleanup"], capture_output=True, text=True, env=env,
        timeout=120,
    )
    assert again.returncode == 0 and "nothing to clean up" in again.stdout


@pytest.mark.parametrize("argv, message", [
    (["--stacks", "ssh:rc4"], "stack ssh has no variant 'rc4'; choose from aes128-gcm, aes256-gcm"),
    (["--stacks", "tls", "--mtu", "70000"], "bad --mtu 70000"),
    (["--stacks", "tls", "--mtu", "100"], "bad --mtu 100"),
    (["--stacks", "tls", "--link", "wifi"], "bad --link 'wifi'"),
    (["--stacks", "smb3", "--link", "peer:-oProxyCommand=sh"], "name a host as ssh does"),
    (["--stacks", "gocryptfs"], "gocryptfs is a storage stack, not a network stack"),
    (["--stacks", "tls", "--workloads", "upload"], "unknown network workload 'upload'"),
    (["--stacks", "tls", "--streams", "0"], "bad --streams 0"),
    (["--stacks", "tls", "--file-size", "10k"], "--file-size 10k"),
    (["--stacks", "wireguard", "--link", "loopback"], "runs only on a netns or peer link"),
    (["--stacks", "tls", "--delay", "5000"], "bad --delay 5000: use 0 … 1000 ms"),
    (["--stacks", "tls", "--link", "loopback", "--delay", "20"],
     "--delay on a loopback link: a delay on lo would slow every local connection"),
    (["--stacks", "tls", "--link", "peer:cc-nowhere", "--delay", "20"],
     "--delay on a peer link: the delay would change the queueing of both hosts' own interfaces"),
])
def test_bad_network_input_is_one_line_and_exit_2(cli, argv, message):
    done = cli("network", *argv)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.root
@pytest.mark.stack_matrix       # 43 s: R3's acceleration x CPUs for TLS, beside the storage stacks
def test_accel_off_through_openssl_makes_tls_slower_and_is_verified_on_each_cpu_count(cli):
    _available("tls")
    done = cli("network", "--stacks", "tls", "--accel", "on,off", "--cpus", "1,2", "--seconds", "1",
               "--min-samples", "3", "--max-samples", "3", "--json", timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout)["results"]
    for n in (1, 2):
        by = {r["stack"]: r for r in results if r["cpus"] == n}
        on, off = by["tls:tls13-aes128-gcm"], by["tls:tls13-aes128-gcm/accel-off"]
        assert (
            on["accel"] is True
            and off["accel"] is False
            and off["accel_env"] == ["OPENSSL_ia32cap"]
        )
        assert off["accel_verified"] is True, off["notes"]
        assert off["accel_speedup"] > 1.2 and off["median_bytes_per_s"] < on["median_bytes_per_s"]
        assert (
            on["params"]["affinity"].startswith(
                f"cryptcost's processes and the kernel's unbound workqueues "
                f"(kcryptd, loop, fscrypt, writeback) pinned to {n} CPU"
            )
            and "tcp" in by
        )
    report = json.loads(cli("report", "latest", "--format", "json").stdout)["analysis"]
    [curve] = [c for c in report["scaling"] if c["stack"] == "tls:tls13-aes128-gcm"]
    assert curve["kind"] == "network" and set(curve["accel"]["worth"]) == {"1", "2"}


@pytest.mark.root
def test_no_key_reaches_any_output_of_a_debug_network_run(tmp_path):
    """Every secret the network stacks create (TLS and SSH private keys, WireGuard keys, the IPsec
    PSK, the SMB password) is read from the key tmpfs while the run measures; afterwards neither
    it, its hex nor its base64 appears in stdout, stderr, the store, the report, the journal or
    the command lines of the processes the run started."""
    names = [
        n for n in ("tls", "ssh", "wireguard", "ipsec", "smb3") if not unavailable_reason(get(n))
    ]
    if len(names) < 5:
        skip_or_fail("tls", f"not every network stack is available: {names}")
    secrets_, found, everything = scan_debug_run(
        tmp_path,
        [
            "network", "--stacks", ",".join(names), "--workloads", "send,put", "--file-size", "8M",
            "--seconds", "1", "--min-samples", "1", "--max-samples", "1", "--warmup", "0", "--json",
        ],
    )
    assert len(secrets_) >= 5, "read no key material during the run"
    print(
        f"key strings checked: {len(secrets_)}, outputs searched: {len(everything)}, found: "
        f"{len(found)}"
    )
    assert not found, found


def test_the_key_scan_finds_a_key_in_any_of_its_forms(tmp_path):
    """The scan above can fail: a key file's secret is found raw, as hex and as base64."""
    raw = os.urandom(32)
    (tmp_path / "wg.key").write_bytes(base64.b64encode(raw) + b"\n")
    (tmp_path / "smb.auth").write_text("username = root\npassword = " + os.urandom(16).hex() + "\n")
    wg, smb = secrets_in(str(tmp_path / "wg.key")), secrets_in(str(tmp_path / "smb.auth"))
    assert raw in wg and raw.hex().encode() in wg and base64.b64encode(raw) in wg
    password = (tmp_path / "smb.auth").read_text().split("password = ")[1].strip().encode()
    assert any(s in b"debug: run: smbclient -U root%" + password for s in smb)


@pytest.mark.root
def test_loopback_link_measures_forwarders_and_says_the_wire_is_not_checked(cli):
    _available("tls")
    done = cli(
        "network", "--stacks", "tls", "--link", "loopback", "--seconds", "1", "--min-samples", "2",
        "--max-samples", "2", "--json", timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    by = {r["stack"]: r for r in json.loads(done.stdout)["results"]}
    r = by["tls:tls13-aes128-gcm"]
    assert r["link"] == "loopback" and r["wire"]["verdict"] == "not checked"
    assert (
        "plaintext leg" in r["wire"]["canary"]["reasons"][0] and r["params"]["negotiated"]["suite"]
    )


@pytest.mark.root
def test_jumbo_frames_carry_through_the_tunnel(cli):
    _available("wireguard")
    done = cli(
        "network", "--stacks", "wireguard", "--mtu", "9000", "--seconds", "1", "--min-samples", "2",
        "--max-samples", "2", "--json", timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    [r] = [r for r in json.loads(done.stdout)["results"] if r["stack"] == "wireguard"]
    assert r["mtu"] == 9000 and r["params"]["tunnel_mtu"] == 8920
    assert 1500 < r["wire"]["median_packet_bytes"] <= 9000 + 14, r["wire"]


@pytest.mark.root
def test_a_renamed_copy_of_a_network_plugin_is_planned_measured_and_recommended(tmp_path):
    """Suites select stacks by their declared facts, never by name: a copy of tls.py with
    its name changed, and nothing else, is in the quick and standard suites the moment its
    file exists, and the quick suite's network part measures, ranks and recommends it."""
    _available("tls")
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    text = (Path(stacks.__file__).parent / "tls.py").read_text()
    assert text.count('name = "tls"') == 1
    (plugins / "tlscopy.py").write_text(text.replace('name = "tls"', 'name = "tlscopy"'))
    load = ("import sys, cryptcost.stacks as s; s.__path__.append(sys.argv[1]); "
            "from cryptcost.workloads.plan import load; from cryptcost.cli import main; ")
    planned = subprocess.run(
        [
            sys.executable,
            "-c",
            load + "print({n: [p.network['stacks'] for p in load(n, None).parts "
            "if p.network] for n in ('quick', 'standard')})",
            str(plugins),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "'tlscopy'" in planned.split("'standard'")[0] and "'tlscopy:*'" in planned, planned
    plan = tmp_path / "plan.toml"
    # (without a warm-up, the suite's profile would be a round of its own: not what this tests)
    plan.write_text(
        'ciphers = false\nstorage = false\n[run]\nsuite = "quick"\n[network]\nprofile = false\n'
        '[policy]\nmin_samples = 2\nmax_samples = 2\nwarmup = 0\n'
    )
    env = {
        **os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
        "CRYPTCOST_STATE_DIR": str(tmp_path / "state"),
    }
    done = subprocess.run(
        [
            sys.executable, "-c", load + "sys.exit(main(sys.argv[2:]))", str(plugins), "run",
            "--plan", str(plan), "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    copy = [r for r in out["results"] if r.get("stack", "").split(":")[0] == "tlscopy"]
    assert copy and copy[0]["baseline"] == "tcp" and copy[0]["overhead"] is not None, out["results"]
    assert copy[0]["params"]["facts"]["use_case"] == get("tls").use_case
    report = subprocess.run(
        [
            sys.executable, "-c", load + "sys.exit(main(sys.argv[2:]))", str(plugins), "report",
            "latest", "--format", "json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert report.returncode == 0, report.stderr[-2000:]
    [rec] = [r for r in json.loads(report.stdout)["analysis"]["recommendations"]
             if r.get("use_case") == get("tls").use_case]
    # ranked against tls in its use case, with its own figures: the two are one program, so they tie
    assert "tlscopy:" in rec["text"] and "tls:" in rec["text"] and "vs tcp" in rec["text"], rec


@pytest.mark.root
def test_a_network_profile_finds_the_cipher_in_the_tunnels_own_library(cli):
    """--profile on a network stack: stunnel's AES-GCM runs in libcrypto, at both ends. Without
    a warm-up the profile is a round of its own after the samples (the quick suite's end-to-end
    test checks the profiled warm-up round, of storage and network stacks alike)."""
    _available("tls")
    from cryptcost.engines import perf
    from cryptcost.errors import Unavailable
    try:
        perf.require()
    except Unavailable as exc:
        skip_or_fail("profile", str(exc))
    done = cli("network", "--stacks", "tls", "--workloads", "send", "--seconds", "1", "--profile",
               "--min-samples", "2", "--max-samples", "2", "--warmup", "0", "--json", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    tls = [r for r in json.loads(done.stdout)["results"] if r["stack"].startswith("tls:")][0]
    rows = tls["profile"]["rows"]
    assert tls["profile"]["samples"] > 50 and tls["samples"] == 2 and len(tls["values"]) == 2
    assert tls["profile"]["how"].startswith("a profiled round after the measured samples")
    assert 0.2 < tls["profile"]["vs_median"] < 5, tls["profile"]
    assert any(
        x["comm"].startswith("stunnel") and x["dso"].startswith("libcrypto") for x in rows
    ), rows[:10]
    report = json.loads(cli("report", "latest", "--format", "json").stdout)["analysis"]
    [b] = [b for b in report["bottlenecks"] if b["stack"] == tls["stack"]]
    assert "perf" in b["explanation"] or b["bottleneck"] == "cipher", b


@pytest.mark.root
def test_esp_keyed_by_hand_runs_where_the_kernel_has_esp_and_says_why_not_elsewhere(cli):
    """This host's kernel has no ESP: one line that names the guest (where the matrix step
    measures every variant). A kernel with ESP measures it here."""
    need_root("esp")
    if unavailable_reason(get("esp")) is None:
        done = cli(
            "network", "--stacks", "esp:aes-cbc", "--workloads", "send", "--seconds", "1",
            "--min-samples", "1", "--max-samples", "1", "--warmup", "0", "--json", timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        [r] = [r for r in json.loads(done.stdout)["results"] if r["stack"] == "esp:aes-cbc"]
        assert r["wire"]["verdict"] == "encrypted", r["wire"]
        return
    done = cli("network", "--stacks", "esp")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert (
        "the kernel has no IPsec ESP" in line and "cryptcost vm -- network --stacks esp" in line
    ), line
