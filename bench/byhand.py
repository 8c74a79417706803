"""The jobs a person runs by hand, which the benches hold cryptcost against.

Each is the bare tool, typed as the field types it, and read with a parser
of its own (not cryptcost's), so that a bench compares two ways of measuring
rather than one way twice:
- `openssl_speed`: `openssl speed [-multi N] -seconds S -bytes B -evp ALG`;
- `fio_job`: `fio --rw=write|read --bs=B --size=N --ioengine=psync …` with
  the options cryptcost uses (below), `--end_fsync=1` for a write, and
  `sync; echo 3 > /proc/sys/vm/drop_caches` before a read.
"""

import json
import os
import re
import subprocess
from pathlib import Path

# The job options cryptcost uses, typed by hand. fio's default fallocate=native
# would preallocate the file and make ext4 writes ~20 % faster than a real
# copy (cp, rsync) sees; cryptcost measures without it.
SAME_AS_CRYPTCOST = ["--refill_buffers=1", "--buffer_compress_percentage=0", "--fallocate=none",
                     "--create_on_open=1"]


def openssl_speed(alg: str, size: int, threads: int, seconds: int) -> float:
    """Bytes/s of one bare `openssl speed` run, from its human-readable table."""
    argv = ["openssl", "speed", "-seconds", str(seconds), "-bytes", str(size), "-evp", alg]
    if threads > 1:
        argv[2:2] = ["-multi", str(threads)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True,
                         env={**os.environ, "LC_ALL": "C"}).stdout
    # last table row: "<name>  <value>k" — thousands of bytes per second
    row = [l for l in out.splitlines() if re.search(r"\d+(\.\d+)?k\s*$", l)][-1]
    return float(row.split()[-1].rstrip("k")) * 1000


def fio_job(directory: Path, rw: str, bs: int, size: int, name: str = "byhand.dat",
            direct: bool = False, seconds: float | None = None) -> float:
    """Bytes/s of one bare fio job on ``directory``, from its JSON; with ``direct``, O_DIRECT
    (no cache to drop before a read, nor to flush after a write); with ``seconds``, the file
    read over and over for that long (``time_based``)."""
    if rw == "read" and not direct:
        subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=True)
    argv = ["fio", "--name=byhand", f"--filename={directory}/{name}", f"--rw={rw}", f"--bs={bs}",
            f"--size={size}", "--ioengine=psync", *SAME_AS_CRYPTCOST, "--output-format=json",
            f"--direct={int(direct)}"]
    if rw == "write" and not direct:
        argv.append("--end_fsync=1")
    if seconds:
        argv += [f"--runtime={round(seconds * 1000)}ms", "--time_based=1"]
    out = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    return out["jobs"][0][rw]["bw_bytes"]
