"""Leave nothing behind, even after kill -9; never touch a disk by accident."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cryptcost.lifecycle.journal import Journal
from tests.system.conftest import need_root


def _env(tmp_path):
    return {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
            "CRYPTCOST_STATE_DIR": str(tmp_path / "state")}


def _start_storage(tmp_path, stack: str, samples: int, **kw) -> subprocess.Popen:
    """cryptcost storage in the background, with this test's store and state."""
    n = str(samples)
    return subprocess.Popen([sys.executable, "-m", "cryptcost", "storage", "--stacks", stack,
                             "--workloads", "seq-quick", "--size", "128M", "--min-samples", n,
                             "--max-samples", n, "--warmup", "0"], env=_env(tmp_path), **kw)


def _mounted(path: str) -> bool:
    return any(line.split()[4] == path for line in open("/proc/self/mountinfo"))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    return state != "Z"


@pytest.mark.root
def test_kill_9_while_mounted_then_cleanup_leaves_nothing(cli, tmp_path):
    need_root()
    proc = _start_storage(
        tmp_path, "gocryptfs", 10, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    state = tmp_path / "state"
    deadline = time.monotonic() + 180
    journal = None
    while time.monotonic() < deadline and journal is None:
        time.sleep(0.2)
        for path in state.glob("journal-*.jsonl"):
            j = Journal.load(path)
            if any(
                e.type == "mount" and e.data.get("fstype") == "fuse" and _mounted(e.data["target"])
                for e in j.entries.values()
            ):
                journal = path
    assert journal is not None, "no FUSE mount appeared"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    entries = list(Journal.load(journal).entries.values())
    mounts = [e.data["target"] for e in entries if e.type == "mount"]
    loops = [e.data["backing"] for e in entries if e.type == "loop"]
    pids = [e.data["pid"] for e in entries if e.type == "daemon" and e.data.get("pid")]
    keys = [e.data["path"] for e in entries if e.type == "keyfile"]
    assert any(_mounted(m) for m in mounts), "kill -9 should have left mounts for cleanup to find"
    assert any(_pid_alive(p) for p in pids)

    done = cli("cleanup")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "released" in done.stdout
    assert not any(_mounted(m) for m in mounts)
    attached = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert not any(b in attached for b in loops)
    assert not any(_pid_alive(p) for p in pids)
    assert not any(os.path.exists(k) for k in keys)
    assert not journal.exists()
    again = cli("cleanup")
    assert again.returncode == 0 and "nothing to clean up" in again.stdout


@pytest.mark.root
def test_sigterm_tears_down_and_keeps_results(cli, tmp_path):
    need_root()
    proc = _start_storage(
        tmp_path, "plain", 30, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    db = tmp_path / "data" / "cryptcost" / "results.db"
    deadline = time.monotonic() + 120
    import sqlite3
    while time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            if sqlite3.connect(db).execute("SELECT count(*) FROM samples").fetchone()[0] >= 2:
                break
        except sqlite3.Error:
            pass
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "kept" in err
    assert list((tmp_path / "state").glob("journal-*")) == []
    shown = json.loads(cli("show", "latest", "--json", "--samples").stdout)
    assert shown["run"]["status"] == "interrupted" and len(shown["samples"]) >= 2


@pytest.fixture
def scratch_device(tmp_path):
    """A 200 MiB loop device on a private tmpfs, carrying an ext4 signature."""
    need_root()
    base = tmp_path / "devfs"
    base.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=220M", "tmpfs", str(base)], check=True)
    img = base / "disk.img"
    subprocess.run(["truncate", "-s", "200M", str(img)], check=True)
    dev = subprocess.run(["losetup", "--find", "--show", str(img)], check=True, capture_output=True,
                         text=True).stdout.strip()
    subprocess.run(["mkfs.ext4", "-q", dev], check=True)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        yield dev, mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        subprocess.run(["losetup", "-d", dev], capture_output=True)
        subprocess.run(["umount", str(base)], capture_output=True)


def _one_line_exit_2(proc, words):
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr, proc.stderr


@pytest.mark.root
def test_device_guard(cli, scratch_device):
    dev, mnt = scratch_device
    args = ["storage", "--stacks", "plain", "--workloads", "seq-quick", "--size", "64M",
            "--min-samples", "1", "--max-samples", "1", "--warmup", "0"]
    _one_line_exit_2(cli(*args, "--medium", f"device:{dev}"), f"--destroy-data-on {dev}")
    _one_line_exit_2(cli(*args, "--medium", f"device:{dev}", "--destroy-data-on", "/dev/other"),
                     f"--destroy-data-on {dev}")
    _one_line_exit_2(cli(*args, "--medium", f"device:{dev}", "--destroy-data-on", dev), "ext4")
    subprocess.run(["mount", dev, str(mnt)], check=True)
    _one_line_exit_2(cli(*args, "--medium", f"device:{dev}", "--destroy-data-on", dev, "--force"),
                     "refused even with --force")
    subprocess.run(["umount", str(mnt)], check=True)
    ok = cli(*args, "--json", "--medium", f"device:{dev}", "--destroy-data-on", dev, "--force")
    assert ok.returncode == 0, ok.stderr
    results = json.loads(ok.stdout)["results"]
    assert results and all(r["medium"] == f"device:{dev}" for r in results)


def test_cleanup_ends_processes_whose_pid_never_reached_the_journal(tmp_path):
    """kill -9 between spawning a daemon and journalling its pid, with a
    workload still running: cleanup finds both by the run's token in their
    environment, ends them, waits until they are gone, and is idempotent."""
    state = tmp_path / "state"
    env = {**os.environ, "CRYPTCOST_STATE_DIR": str(state)}
    script = (
        "from cryptcost import proc\n"
        "from cryptcost.lifecycle.resources import Resources\n"
        "import time\nres = Resources()\n"
        "res.journal.add('daemon', argv0='sleep', exe='sleep')\n"  # the pid never follows
        "d = proc.spawn(['sleep', '600'])\n"
        "w = proc.spawn(['sh', '-c', 'sleep 600 & wait'])\n"  # a workload with a child
        "print(d.pid, w.pid, flush=True)\ntime.sleep(600)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env
    )
    pids = [int(p) for p in child.stdout.readline().split()]
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert all(os.path.exists(f"/proc/{p}") for p in pids)
    done = subprocess.run(
        [sys.executable, "-m", "cryptcost", "cleanup"], capture_output=True, text=True, env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ended process" in done.stdout
    time.sleep(0.2)
    alive = [p for p in pids if os.path.exists(f"/proc/{p}") and
             open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
    assert alive == []
    again = subprocess.run(
        [sys.executable, "-m", "cryptcost", "cleanup"], capture_output=True, text=True, env=env,
        timeout=120,
    )
    assert again.returncode == 0 and "nothing to clean up" in again.stdout


@pytest.mark.root
def test_the_key_scan_waits_for_a_key_directory_being_mounted_and_fails_a_bare_one(tmp_path):
    """The key scan of the debug-run tests (keyscan.py) may meet a run's key directory between
    its mkdir and its tmpfs mount: it looks again until the tmpfs is there, and still fails a
    directory that never gets one; one removed meanwhile is not scanned."""
    import threading

    from tests.system.keyscan import _settled_private
    need_root()
    bare = tmp_path / "cryptcost-keys-bare"
    bare.mkdir(mode=0o700)
    assert _settled_private(str(bare), str(bare), ["self"], wait=0.3) is False
    gone = str(tmp_path / "cryptcost-keys-gone")
    assert _settled_private(gone, gone, ["self"], wait=0.3) is None
    later = tmp_path / "cryptcost-keys-later"
    later.mkdir(mode=0o700)
    mount = threading.Timer(0.3, subprocess.run, [["mount", "-t", "tmpfs", "-o",
                                                   "size=1m,mode=0700", "tmpfs", str(later)]])
    mount.start()
    try:
        assert _settled_private(str(later), str(later), ["self"], wait=5) is True
    finally:
        mount.join()
        subprocess.run(["umount", str(later)], check=False)
