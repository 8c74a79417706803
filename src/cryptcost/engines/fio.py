"""The fio engine: one fio invocation per measured operation, JSON output.

Every job writes incompressible data (``refill_buffers=1`` with
``buffer_compress_percentage=0``: rule 3), lays files out without
fallocate (FUSE stacks such as rclone refuse it) and opens them on first
I/O (``create_on_open=1``), identically for a stack and its baseline.
fio times with ``clock_gettime`` (the kernel's monotonic clock, as the rest
of cryptcost): a virtual machine's TSC is not always trustworthy. (fio 3.33
still calibrates the TSC at every start, about 64 ms, and waits 100 ms for
its job to start: a run costs about 0.2 s before its first I/O here, 0.7 s
in an emulated guest.)

With ``stat_dir``, fio itself reads ``/proc/stat`` just before its job's
first I/O (``exec_prerun``; fio saves the command's output as
``NAME.prerun.txt`` in its working directory), so that the CPU a pass is
billed for starts with the job, not with fio's start-up (as much CPU as
a short read pass itself). The window closes when fio has exited: its
teardown is short and nearly idle, where an ``exec_postrun`` would cost one more process start per
run (dear in an emulated guest).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import ProcessError

COMMON = ["--refill_buffers=1", "--buffer_compress_percentage=0", "--randrepeat=0",
          "--fallocate=none", "--create_on_open=1", "--output-format=json", "--group_reporting=1",
          "--clocksource=clock_gettime",
          # no disk statistics: cryptcost reads none, and finding the device under a file (a walk
          # of /sys/block) cost each fio start about 10 ms here
          "--disk_util=0"]
FILE_OPS = {"filecreate", "filestat", "filedelete"}
# /proc/stat through the shell's builtins: fio's system() starts one shell and no
# other program (a process start is dear in an emulated guest)
# the shell's builtins only (no process to start): the clock (CLOCK_BOOTTIME, 10 ms steps) and
# the CPU counters, just before the job's first I/O; one command, since fio sends only the last
# command's output to its file
READ_STAT = ("{ read -r up idle < /proc/uptime; echo \"uptime $up\"; "
             "while read -r line; do echo \"$line\"; done < /proc/stat; }")


@dataclass(frozen=True)
class FioJob:
    """One fio job. ``rw`` is fio's (write, read, randread, randwrite, randrw)
    or a metadata engine (filecreate, filestat, filedelete)."""

    rw: str
    bs: int
    size: int                      # bytes per file (sequential: what is moved)
    iodepth: int = 1
    direct: bool = False
    end_fsync: bool = False
    runtime: float | None = None   # seconds, time-based when set: the file read over and over
    cap: float | None = None       # stop issuing I/O after this many seconds (not time-based)
    nrfiles: int = 1
    filesize: str | None = None    # e.g. "4k:64k" for many small files
    rwmixread: int | None = None
    extra: tuple[str, ...] = ()

    def ioengine(self) -> str:
        if self.rw in FILE_OPS:
            return self.rw
        return "io_uring" if self.iodepth > 1 else "psync"

    def argv(self, directory: str | Path, name: str) -> list[str]:
        rw = "read" if self.rw in FILE_OPS else self.rw
        argv = ["fio", f"--name={name}", f"--directory={directory}", f"--rw={rw}",
                f"--bs={self.bs}",
                f"--ioengine={self.ioengine()}", f"--iodepth={self.iodepth}",
                f"--direct={int(self.direct)}", f"--end_fsync={int(self.end_fsync)}", *COMMON]
        if self.nrfiles > 1:
            argv += [f"--nrfiles={self.nrfiles}", f"--filesize={self.filesize or self.size}",
                     "--openfiles=1", "--file_service_type=sequential",
                     f"--filename_format={name}.$filenum"]
            if self.rw in FILE_OPS:
                argv = [a for a in argv
                        if not a.startswith("--create_on_open")] + ["--create_on_open=0"]
        else:
            argv += [f"--filename={name}.dat", f"--size={self.size}"]
        if self.runtime:
            argv += [f"--runtime={max(1, round(self.runtime * 1000))}ms", "--time_based=1"]
        elif self.cap:
            argv += [f"--runtime={max(1, round(self.cap * 1000))}ms"]
        if self.rwmixread is not None:
            argv += [f"--rwmixread={self.rwmixread}"]
        return argv + list(self.extra)


@dataclass(frozen=True)
class FioOutcome:
    """What one fio run moved, from its JSON."""

    io_bytes: int
    runtime_s: float
    bw_bytes: float
    iops: float
    total_ios: int
    lat_p50_us: float | None
    lat_p99_us: float | None
    read_bytes: int = 0
    write_bytes: int = 0
    extra: dict = field(default_factory=dict)
    stat: str | None = None                # /proc/stat just before the job's first I/O
    first_io: float | None = None          # the boot clock's seconds then (/proc/uptime)


def _pct(side: dict, q: str) -> float | None:
    pct = side.get("clat_ns", {}).get("percentile") or {}
    value = pct.get(q)
    return value / 1000 if value else None


def parse(text: str) -> FioOutcome:
    """The summed read+write (or the only active side) of fio's first job."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON in fio output")
    data = json.loads(text[start:])
    job = data["jobs"][0]
    if job.get("error"):
        raise ValueError(f"fio job error {job['error']}")
    sides = [job[k] for k in ("read", "write") if job.get(k, {}).get("total_ios", 0) > 0]
    if not sides:
        raise ValueError("fio moved nothing")
    runtime_ms = max(s["runtime"] for s in sides)
    io_bytes = sum(s["io_bytes"] for s in sides)
    busiest = max(sides, key=lambda s: s["total_ios"])
    return FioOutcome(io_bytes=io_bytes, runtime_s=runtime_ms / 1000,
                      bw_bytes=sum(s["bw_bytes"] for s in sides),
                      iops=sum(s["iops"] for s in sides),
                      total_ios=sum(s["total_ios"] for s in sides),
                      lat_p50_us=_pct(busiest, "50.000000"), lat_p99_us=_pct(busiest, "99.000000"),
                      read_bytes=job.get("read", {}).get("io_bytes", 0),
                      write_bytes=job.get("write", {}).get("io_bytes", 0),
                      extra={"fio_version": data.get("fio version"), "usr_cpu": job.get("usr_cpu"),
                             "sys_cpu": job.get("sys_cpu")})


def failure(stdout: str, stderr: str) -> str:
    """fio's own reason for a failed job. With ``--output-format=json`` fio
    prints it as a ``fio: …`` line before the JSON, on stdout, and stderr
    may be empty; the JSON's job carries only an errno, named here where no
    such line came."""
    said = [ln.strip() for ln in (stderr + "\n" + stdout).splitlines()
            if ln.strip().startswith("fio:")]
    if said:
        return "; ".join(dict.fromkeys(said))
    start = stdout.find("{")
    try:
        errno = json.loads(stdout[start:])["jobs"][0].get("error") if start >= 0 else None
    except (ValueError, KeyError, IndexError, TypeError):
        errno = None
    return (f"fio job error {errno} ({os.strerror(errno)})" if isinstance(errno, int) and errno
            else "")


def run(job: FioJob, directory: str | Path, name: str, timeout: float = 900,
        stat_dir: Path | None = None) -> tuple[FioOutcome, float]:
    """Run ``job`` in ``directory``; return (outcome, wall seconds). With
    ``stat_dir`` (a private directory), the outcome carries ``/proc/stat``
    as it was just before the job's first I/O (``stat``)."""
    argv = job.argv(directory, name)
    if stat_dir is not None:
        argv += [f"--exec_prerun={READ_STAT}"]
    done = proc.run(argv, timeout=timeout, check=False, cwd=str(stat_dir) if stat_dir else None)
    if done.returncode != 0:
        raise ProcessError(done.argv, done.returncode, done.stdout[-2000:], done.stderr,
                           reason=failure(done.stdout, done.stderr))
    try:
        outcome = parse(done.stdout)
    except (ValueError, KeyError, json.JSONDecodeError) as exc:
        raise ProcessError(done.argv, done.returncode, done.stdout[-2000:], done.stderr,
                           why=f"unreadable fio output: {exc}") from None
    if stat_dir is not None:
        saved = Path(stat_dir) / f"{name}.prerun.txt"
        try:
            text = saved.read_text()
        except OSError:
            text = ""
        saved.unlink(missing_ok=True)
        if "cpu " in text:
            outcome = replace(outcome, stat=text)
        up = re.search(r"^uptime (\d+\.\d+)", text, re.M)
        if up:
            outcome = replace(outcome, first_io=float(up.group(1)))
    return outcome, done.seconds
