"""Search every output of a --debug run for the key material it created.

While the run measures, every file on its key tmpfs (/tmp/cryptcost-keys-*)
is read and each secret in it kept — raw, and each long base64 or hex run
decoded and re-encoded — together with the journal and the command line of
every process the run started. Afterwards none of them may appear in stdout,
stderr, the store, the HTML and JSON reports, the journal or those command
lines."""

from __future__ import annotations

import base64
import binascii
import glob
import os
import re
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.conftest import TALLY

B64 = re.compile(rb"[A-Za-z0-9+/=]{24,}|[0-9a-f]{24,}")


def secrets_in(path: str) -> set[bytes]:
    """The key material of a key file: each long base64 or hex run, decoded too, and as hex."""
    data = open(path, "rb").read()
    found = set()
    for run in B64.findall(data):
        found.add(run)
        try:
            raw = base64.b64decode(run + b"=" * (-len(run) % 4), validate=False)
            if len(raw) >= 16:
                found |= {raw, raw.hex().encode(), base64.b64encode(raw)}
        except (binascii.Error, ValueError):
            pass
    if len(data) >= 16 and not B64.fullmatch(data.strip()):
        found |= {data, data.hex().encode(), base64.b64encode(data)}
    return {s for s in found if len(s) >= 16}


def _keydir_is_private(keydir: str, pid: str = "self") -> bool:
    """A 0700 tmpfs, as process ``pid`` sees it (a run under ``ip netns exec`` mounts in a mount
    namespace of its own: its key tmpfs is seen only there, through /proc/PID/root)."""
    mode = os.stat(f"/proc/{pid}/root{keydir}" if pid != "self" else keydir).st_mode
    mounted = any(line.split()[4] == keydir and line.split(" - ")[1].startswith("tmpfs")
                  for line in open(f"/proc/{pid}/mountinfo"))
    return stat.S_IMODE(mode) == 0o700 and mounted


def _settled_private(keydir: str, name: str, whos: list[str], wait: float = 2.0) -> bool | None:
    """Whether key directory ``name`` (found at ``keydir``) is a private tmpfs in the namespace
    of any of ``whos`` (the one that mounted it), None if it is gone. A run makes its key
    directory, then mounts the tmpfs on it (and unmounts before removing it): a scan between the
    two sees a bare directory, so one not private yet is looked at again for ``wait`` seconds
    before it counts as not private."""
    deadline = time.monotonic() + wait
    while True:
        for who in whos:
            try:
                if _keydir_is_private(name, who):
                    return True
            except OSError:
                pass                                        # that process ended meanwhile
        if not os.path.exists(keydir):
            return None
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _keydirs(pids) -> dict[str, str]:
    """Every key tmpfs these processes (and this one) see: path as read from here → pid."""
    found = {}
    for pid in ["self", *map(str, pids)]:
        root = "" if pid == "self" else f"/proc/{pid}/root"
        for path in glob.glob(f"{root}/tmp/cryptcost-keys-*"):
            found.setdefault(path, pid)
    return found


def scan_debug_run(tmp_path, args: list[str], prefix: list[str] = (), states: list = (),
                   logs: str | None = None, timeout: float = 1800,
                   report: Path | None = None) -> tuple[set[bytes], list, dict]:
    """Run ``cryptcost --debug ARGS`` (after ``prefix``, e.g. ``ip netns exec NS``); return (key
    strings read, where any was found, outputs). The key tmpfs are read each time a part of the
    run starts measuring (``measuring:``), when its stacks are set up: a suite's storage part
    and its network part each. ``states``: other state directories whose journals are searched
    too (a peer's); ``logs``: a glob of files read while the run lives (a peer worker's log,
    which the run removes); ``report``: the HTML report the run wrote itself (``run -o``), searched
    instead of one written afterwards."""
    env = {
        **os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
        "CRYPTCOST_STATE_DIR": str(tmp_path / "state"),
    }
    env.pop("CRYPTCOST_RUN", None)
    logged: dict[str, bytes] = {}
    child = subprocess.Popen([*prefix, sys.executable, "-m", "cryptcost", "--debug", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    lines: list[bytes] = []
    outs: list[bytes] = []  # both pipes are drained as the run writes (a big --json)
    readers = [
        threading.Thread(
            target=lambda: lines.extend(iter(child.stderr.readline, b"")), daemon=True
        ),
        threading.Thread(target=lambda: outs.append(child.stdout.read()), daemon=True),
    ]
    for reader in readers:
        reader.start()
    secrets_: set[bytes] = set()
    cmdlines: set[bytes] = set()
    run_pids: set[str] = set()
    journals: list[bytes] = []
    keydirs: set[str] = set()
    others = set(
        glob.glob("/tmp/cryptcost-keys-*")
    )  # another run's (or a killed one's): not this run's keys
    scanned = 0                                             # the parts whose keys were read
    deadline = time.monotonic() + timeout
    try:
        while child.poll() is None:
            assert time.monotonic() < deadline, f"the run took over {timeout} s"
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    try:
                        if b"CRYPTCOST_RUN=" in open(f"/proc/{pid}/environ", "rb").read():
                            cmdlines.add(open(f"/proc/{pid}/cmdline", "rb").read())
                            run_pids.add(pid)
                    except OSError:
                        pass
            parts = sum(b"measuring:" in line for line in lines)
            if parts > scanned:
                scanned = parts
                for keydir, pid in _keydirs([child.pid, *run_pids]).items():
                    name = keydir.split("/root", 1)[1] if keydir.startswith("/proc/") else keydir
                    if name in others:
                        continue
                    private = _settled_private(keydir, name, ["self", str(child.pid), *run_pids])
                    if private is None:
                        continue                            # released meanwhile: no keys to read
                    assert private, f"{keydir} is not a private 0700 tmpfs"
                    keydirs.add(keydir)
                    for path in glob.glob(f"{keydir}/*"):
                        if not path.endswith(".pub"):
                            try:
                                secrets_ |= secrets_in(path)
                            except OSError:
                                pass
                for state in [tmp_path / "state", *states]:
                    journals += [open(j, "rb").read() for j in glob.glob(str(state) + "/journal-*")]
            elif parts and not secrets_:                    # a part whose keys were not written yet
                scanned = 0
            for path in glob.glob(logs) if logs else []:
                try:
                    logged[path] = open(path, "rb").read()
                except OSError:
                    pass
            time.sleep(0.1)
    except BaseException:
        child.terminate()  # a failed check: let the run release what it made
        child.wait(timeout=300)
        raise
    for reader in readers:
        reader.join(timeout=30)
    out = b"".join(outs)
    assert child.returncode == 0, b"".join(lines)[-2000:]
    assert not any(os.path.exists(k) and os.listdir(k) for k in keydirs), (
        "key files outlived the run"
    )
    if report is None:
        report = tmp_path / "report.html"
        subprocess.run(
            [sys.executable, "-m", "cryptcost", "report", "--format", "html", "-o", str(report)],
            env=env, check=True, capture_output=True, cwd=tmp_path,
        )
    exported = subprocess.run(
        [sys.executable, "-m", "cryptcost", "report", "--format", "json"], env=env, check=True,
        capture_output=True, cwd=tmp_path,
    ).stdout
    store = b"".join(
        open(p, "rb").read() for p in glob.glob(str(tmp_path / "data" / "cryptcost" / "*"))
    )
    everything = {
        "stdout": out, "stderr": b"".join(lines), "store": store, "report": report.read_bytes(),
        "json": exported, "journal": b"".join(journals), "argv": b"\n".join(cmdlines),
        "logs": b"".join(logged.values()),
    }
    found = [(where, s[:12]) for where, blob in everything.items() for s in secrets_ if s in blob]
    TALLY["key strings searched for"] += len(secrets_)
    TALLY["key bytes found"] += len(found)
    return secrets_, found, everything
