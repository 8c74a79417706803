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


def _keydir_is_private(keydir: str) -> bool:
    mode = os.stat(keydir).st_mode
    mounted = any(line.split()[4] == keydir and line.split(" - ")[1].startswith("tmpfs")
                  for line in open("/proc/self/mountinfo"))
    return stat.S_IMODE(mode) == 0o700 and mounted


def scan_debug_run(tmp_path, args: list[str]) -> tuple[set[bytes], list, dict]:
    """Run ``cryptcost --debug ARGS``; return (key strings read, where any was found, outputs)."""
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "CRYPTCOST_STATE_DIR": str(tmp_path / "state")}
    child = subprocess.Popen([sys.executable, "-m", "cryptcost", "--debug", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    lines: list[bytes] = []
    outs: list[bytes] = []                  # both pipes are drained as the run writes (a big --json)
    readers = [threading.Thread(target=lambda: lines.extend(iter(child.stderr.readline, b"")), daemon=True),
               threading.Thread(target=lambda: outs.append(child.stdout.read()), daemon=True)]
    for reader in readers:
        reader.start()
    secrets_: set[bytes] = set()
    cmdlines: set[bytes] = set()
    journals: list[bytes] = []
    keydirs: set[str] = set()
    others = set(glob.glob("/tmp/cryptcost-keys-*"))       # another run's (or a killed one's): not this run's keys
    while child.poll() is None:
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    if b"CRYPTCOST_RUN=" in open(f"/proc/{pid}/environ", "rb").read():
                        cmdlines.add(open(f"/proc/{pid}/cmdline", "rb").read())
                except OSError:
                    pass
        if any(b"measuring:" in line for line in lines) and not secrets_:
            for keydir in set(glob.glob("/tmp/cryptcost-keys-*")) - others:
                assert _keydir_is_private(keydir), f"{keydir} is not a private 0700 tmpfs"
                keydirs.add(keydir)
                for path in glob.glob(f"{keydir}/*"):
                    if not path.endswith(".pub"):
                        secrets_ |= secrets_in(path)
            journals += [open(j, "rb").read() for j in glob.glob(str(tmp_path / "state" / "journal-*"))]
        time.sleep(0.1)
    for reader in readers:
        reader.join(timeout=30)
    out = b"".join(outs)
    assert child.returncode == 0, b"".join(lines)[-2000:]
    assert not any(os.path.exists(k) and os.listdir(k) for k in keydirs), "key files outlived the run"
    report = tmp_path / "report.html"
    subprocess.run([sys.executable, "-m", "cryptcost", "report", "--format", "html", "-o", str(report)], env=env,
                   check=True, capture_output=True, cwd=tmp_path)
    exported = subprocess.run([sys.executable, "-m", "cryptcost", "report", "--format", "json"], env=env,
                              check=True, capture_output=True, cwd=tmp_path).stdout
    store = b"".join(open(p, "rb").read() for p in glob.glob(str(tmp_path / "data" / "cryptcost" / "*")))
    everything = {"stdout": out, "stderr": b"".join(lines), "store": store, "report": report.read_bytes(),
                  "json": exported, "journal": b"".join(journals), "argv": b"\n".join(cmdlines)}
    found = [(where, s[:12]) for where, blob in everything.items() for s in secrets_ if s in blob]
    TALLY["key strings searched for"] += len(secrets_)
    TALLY["key bytes found"] += len(found)
    return secrets_, found, everything
