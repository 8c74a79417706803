"""One network operation on one stack instance, turned into a sample.

Every sample is timed by the workload's own clock (iperf3's receiver, or
the file copy's wall time), captured on the wire (:mod:`runner.network.wire`) and
accounted for CPU three ways (rule 7): the whole system's split from
``/proc/stat`` (user, system, softirq …), each end's processes (iperf3's
own figures or the client's rusage, plus the stack's daemons at that end,
children included), and what no process accounts for (kernel threads and
softirq: where a kernel tunnel's crypto runs). Both ends of a ``netns``
link share this machine's CPUs, so CPU-seconds per GB per end is the
figure that carries over to real hosts.
"""

from __future__ import annotations

import hashlib
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from cryptcost import proc
from cryptcost.engines import dbench, iperf3
from cryptcost.errors import CryptcostError, DataIntegrityError
from cryptcost.host import cpu
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.model import CpuSplit, Sample
from cryptcost.runner.core.profile import unwatched
from cryptcost.runner.network.wire import CANARY, Capture, PlaintextOnWire, judge
from cryptcost.stacks.net import Endpoint, FileShareStack, NetworkStack
from cryptcost.workloads.network import NetOp

GB = 1e9
CHUNK = 1 << 20
MIN_SAMPLE_SECONDS = 1.0
MAX_PASSES = 16
# What the canary sends: a byte count, not a time, so that it takes what its check needs (the
# capture keeps its first packets) rather than a second on every stack; 16 MiB is thousands of
# full-sized packets at any MTU, and a few hundred of a TCP offload's largest.
CANARY_BYTES = 16 << 20


@dataclass
class NetInstance:
    """One network stack built on the run's link."""

    stack: NetworkStack
    label: str
    role: str
    # the run's shared link, or one of its own (``exclusive`` stacks)
    link: Link | None = None
    service: int | None = None           # iperf3's port at end b of that link
    endpoint: Endpoint | None = None
    error: str | None = None
    canary: dict | None = None


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


class FileSource:
    """Random files on a private tmpfs for the file-share workloads, with
    their checksums: one large file, many small ones, and a pattern file
    for the canary."""

    def __init__(self, res: Resources, file_bytes: int, small: int, small_bytes: int):
        self.root = res.tmpdir("cryptcost-netfiles-")
        res.tmpfs(self.root, 2 * file_bytes + 2 * small * small_bytes + (64 << 20), "0700")
        self.big = self.root / "cc-big.bin"
        _random_file(self.big, file_bytes)
        self.small_dir = self.root / "small"
        self.small_dir.mkdir()
        self.small = []
        for i in range(small):
            path = self.small_dir / f"cc-small-{i:04d}.bin"
            _random_file(path, small_bytes)
            self.small.append(path)
        self.sums = {p.name: sha256(p) for p in [self.big, *self.small]}
        self.canary = self.root / "cc-canary.txt"
        self.canary.write_bytes(CANARY * (CHUNK // len(CANARY)))
        self.inbox = self.root / "inbox"
        self.inbox.mkdir()


def _random_file(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        left = size
        while left:
            n = min(left, CHUNK)
            fh.write(os.urandom(n))
            left -= n


class NetRunner:
    """Measures one operation on one instance; see the module docstring."""

    def __init__(self, res: Resources, workdir: Path, seconds: float,
                 files: FileSource | None = None):
        self.res, self.workdir = res, workdir
        self.seconds, self.files = seconds, files
        # What each measured transfer runs inside (a profiler's sampling window); nothing by
        # default.
        self.window = unwatched

    # --- the canary ---------------------------------------------------------------
    def canary(self, inst: NetInstance) -> dict:
        """Send the repeating pattern through the stack once, captured; an
        encryption stack whose wire shows it fails here, before any sample."""
        stack = inst.stack
        with self._capture(inst) as cap:
            if isinstance(stack, FileShareStack):
                stack.put(self.res, [self.files.canary], "")
                _remove(inst, stack.share / self.files.canary.name)
            else:
                self._iperf(inst, None, NetOp("send", "stream"), repeating=True,
                            nbytes=CANARY_BYTES)
        if cap is None:
            return {"verdict": "not checked",
                    "reasons": [f"a {inst.link.name} link carries the plaintext leg "
                                "between a forwarder and the service too"]}
        wire = judge(cap.packets(), stack.leak, self._port(inst), canary=True, sealed=stack.sealed)
        return self._enforce(inst, wire,
                             f"{inst.label}: the canary crossed the wire in plaintext: ")

    # --- one sample -----------------------------------------------------------------
    def __call__(self, inst: NetInstance, op: NetOp) -> dict[tuple, Sample]:
        stack = inst.stack
        why = stack.dead()
        if why:
            raise CryptcostError(why)
        meter = Meter(inst.link, stack.end_pids())
        try:
            with self._capture(inst) as cap:
                if op.traffic == "stream":
                    with self.window(inst, op), meter.window():
                        moved, seconds, ends = self._stream(inst, op)
                elif op.workload == "dbench":
                    moved, seconds, ends = self._dbench(inst, op, meter)
                else:
                    moved, seconds, ends = self._files(inst, op, meter)
        except CryptcostError as exc:
            why = stack.dead()
            raise CryptcostError(why or str(exc)) from None
        for end in ("a", "b"):
            ends[end] += meter.end(end)
        split = meter.split
        daemons = meter.daemon.values()
        metrics = {"unit": "bytes/s", "engine": "iperf3" if op.traffic == "stream" else "file copy",
                   "cpu_a": ends["a"], "cpu_b": ends["b"], **ends.get("extra", {}),
                   "busiest_daemon_core": max(daemons,
                                              default=0.0) / seconds if meter.daemon else None}
        gb = moved / GB
        names = stack.daemon_names()
        metrics["daemon_cpu_s_per_gb"] = {names.get(pid, str(pid)): cpu_s / gb
                                          for pid, cpu_s in meter.daemon.items()}
        metrics["cpu_s_per_gb_a"], metrics["cpu_s_per_gb_b"] = ends["a"] / gb, ends["b"] / gb
        metrics["cpu_s_per_gb_system"] = split.busy / gb
        metrics["cpu_s_per_gb_unattributed"] = max(0.0, split.busy - ends["a"] - ends["b"]) / gb
        if cap is not None:
            wire = judge(cap.packets(), stack.leak, self._port(inst), sealed=stack.sealed)
            metrics["wire"] = self._enforce(inst, wire, f"{inst.label} {op.workload}: ")
        return {(inst.label,
                 op.key): Sample(value=moved / seconds, seconds=seconds, bytes_moved=moved,
                                 cpu=split, metrics=metrics)}

    @staticmethod
    def _enforce(inst: NetInstance, wire: dict, prefix: str) -> dict:
        """Fail a measured stack whose wire shows plaintext. A variant that
        does not encrypt by design (IPsec's null cipher) is plaintext
        whatever its random payload looks like: the verdict says so, and why."""
        stack = inst.stack
        if stack.variant_role() != "measured":
            return wire
        hidden = stack.confidential()
        if hidden is not True:
            return {**wire, "verdict": "plaintext", "expected": f"plaintext by design: {hidden}"}
        if wire["verdict"] == "plaintext":
            raise PlaintextOnWire(prefix + "; ".join(wire["reasons"]))
        return wire

    def _capture(self, inst: NetInstance):
        if not inst.link.wire_checked:
            return _NoCapture()
        return Capture(self.res, inst.link, self.workdir)

    @staticmethod
    def _port(inst: NetInstance) -> int:
        """The plaintext port the wire must not show: the share's own for a file share."""
        return getattr(inst.stack, "service_port", inst.service)

    # --- streams ----------------------------------------------------------------------
    def _iperf(self, inst: NetInstance, seconds: float | None, op: NetOp,
               repeating: bool = False, nbytes: int | None = None) -> iperf3.IperfOutcome:
        argv = iperf3.client_argv(inst.endpoint.host, inst.endpoint.port, seconds,
                                  streams=op.streams, reverse=op.reverse,
                                  repeating=repeating or op.repeating, nbytes=nbytes)
        done = inst.link.at("a").run(argv, timeout=(seconds or 0) + 60, check=False)
        return iperf3.parse(done.stdout, reverse=op.reverse)

    def _stream(self, inst: NetInstance, op: NetOp) -> tuple[int, float, dict]:
        out = self._iperf(inst, self.seconds, op)
        return out.bytes, out.seconds, {"a": out.client_cpu, "b": out.server_cpu,
                                        "extra": {"retransmits": out.retransmits,
                                                  "iperf3_version": out.version}}

    # --- files ----------------------------------------------------------------------------
    def _files(self, inst: NetInstance, op: NetOp, meter: "Meter") -> tuple[int, float, dict]:
        """As many copies as fill :data:`MIN_SAMPLE_SECONDS` of measured time
        (at most :data:`MAX_PASSES`), each checked and cleared between passes,
        outside the clock."""
        stack: FileShareStack = inst.stack
        src = self.files
        moved, seconds, client, passes = 0, 0.0, 0.0, 0
        while seconds < MIN_SAMPLE_SECONDS and passes < MAX_PASSES:
            if op.workload == "get":
                self._stage(inst, src.big)
            if op.workload == "get":
                stack.forget([src.big.name])
            client_before = cpu.children_cpu()
            with self.window(inst, op), meter.window():
                start = time.perf_counter()
                if op.workload == "put":
                    stack.put(self.res, [src.big], "")
                elif op.workload == "smallfiles":
                    stack.put(self.res, src.small, "")
                else:
                    stack.get(self.res, [src.big.name], src.inbox)
                seconds += time.perf_counter() - start
            client += cpu.children_cpu() - client_before
            moved += self._verify(inst, op)
            passes += 1
        return moved, seconds, {"a": client, "b": 0.0,
                                "extra": {"files_per_s": op.files * passes / seconds,
                                          "passes": passes,
                                          "timing": "the client's whole run (connect, "
                                                    "authenticate, copy, close), each pass "
                                                    "checked outside the clock"}}

    def _dbench(self, inst: NetInstance, op: NetOp, meter: "Meter") -> tuple[int, float, dict]:
        """dbench's mix with ``op.streams`` clients in the share's client mount, one run; the
        directory is removed afterwards, outside the clock."""
        stack: FileShareStack = inst.stack
        target = stack.mountpoint() / f"cc-dbench-{op.streams}"
        client_before = cpu.children_cpu()
        with self.window(inst, op), meter.window():
            done = dbench.run(target, op.streams)
        client = cpu.children_cpu() - client_before
        proc.run(["rm", "-rf", "--one-file-system", str(target)], timeout=600)
        return done.bytes, done.wall_seconds, {
            "a": client, "b": 0.0,
            "extra": {"engine": f"dbench {op.streams} clients", "timing": dbench.TIMING}}

    def _stage(self, inst: NetInstance, big: Path) -> None:
        """The file a ``get`` reads, in the share at end b (outside the clock): copied there
        where that end's files are this host's, else put through the stack itself."""
        stack: FileShareStack = inst.stack
        b = inst.link.at("b")
        target = stack.share / big.name
        if b.local:
            if not target.exists():
                _copy(big, target)
        elif b.run(["test", "-e", str(target)], check=False, timeout=30).returncode != 0:
            stack.put(self.res, [big], "")

    def _verify(self, inst: NetInstance, op: NetOp) -> int:
        """Every byte arrived intact (rule 5); then clear the target, outside the clock. A file
        in the share of a peer is checked there (sha256sum at end b)."""
        stack: FileShareStack = inst.stack
        src = self.files
        b = inst.link.at("b")
        if op.workload == "get":
            targets, end = [src.inbox / src.big.name], None
        elif op.workload == "put":
            targets, end = [stack.share / src.big.name], b
        else:
            targets, end = [stack.share / p.name for p in src.small], b
        if end is not None and end.local:
            end = None
        moved = 0
        for path in targets:
            size, digest = _summed(path, end)
            if digest != src.sums[path.name]:
                raise DataIntegrityError(f"{stack.label} {op.workload}: {path.name} arrived "
                                         + ("changed" if digest else "missing"))
            moved += size
        if end is not None:
            _remove(inst, *targets)
        else:
            for path in targets:
                path.unlink()
        return moved


class Meter:
    """CPU over the measured windows of one sample only (not the checks
    between passes): the system-wide split of each machine the link's ends
    run on (one for ``netns``, two for a peer), and each process's own, asked
    of the end it runs at."""

    def __init__(self, link: Link, pids: dict[str, list[int]]):
        self.link, self.pids = link, pids
        self.daemon = {pid: 0.0 for ps in pids.values() for pid in ps}
        self.machines = {link.at(end).machine: link.at(end) for end in ("a", "b")}
        self.split: CpuSplit | None = None

    def _processes(self) -> dict[int, float]:
        got: dict[int, float] = {}
        for end, pids in self.pids.items():
            if pids:
                got.update(self.link.at(end).process_cpu(pids))
        return got

    @contextmanager
    def window(self):
        before = {m: end.stat() for m, end in self.machines.items()}
        dbefore = self._processes()
        yield
        after = {m: end.stat() for m, end in self.machines.items()}
        dafter = self._processes()
        for pid in self.daemon:
            self.daemon[pid] += max(0.0, dafter.get(pid, 0.0) - dbefore.get(pid, 0.0))
        for m in self.machines:
            self.split = _added(self.split, cpu.cpu_split(before[m], after[m]))
        self.split = replace(self.split, daemons=sum(self.daemon.values()))

    def end(self, end: str) -> float:
        return sum(self.daemon[p] for p in self.pids.get(end, []))


def _added(total: CpuSplit | None, split: CpuSplit) -> CpuSplit:
    """Two windows' (or two machines') CPU seconds together; the busiest core of either."""
    if total is None:
        return split
    return CpuSplit(**{f: getattr(split, f) + getattr(total, f)
                       for f in CpuSplit.__dataclass_fields__ if f != "max_core_busy"},
                    max_core_busy=max(split.max_core_busy, total.max_core_busy))


class _NoCapture:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None


def _summed(path: Path, end=None) -> tuple[int, str | None]:
    """(size, sha256) of a file here, or at ``end`` (another machine); (0, None) where it
    does not exist."""
    if end is None:
        return (path.stat().st_size, sha256(path)) if path.exists() else (0, None)
    done = end.run(["sh", "-c", '[ -e "$1" ] || exit 3; stat -c %s "$1"; sha256sum "$1"',
                    "sh", str(path)], check=False, timeout=600)
    if done.returncode == 3:
        return 0, None
    if done.returncode != 0:
        raise DataIntegrityError(f"cannot check {path} at end b: {done.stderr.strip()[-200:]}")
    size, digest = done.stdout.split()[:2]
    return int(size), digest


def _remove(inst: NetInstance, *paths: Path) -> None:
    """Remove files at end b (wherever it is), outside the clock."""
    inst.link.at("b").run(["rm", "-f", *map(str, paths)], timeout=120)


def _copy(src: Path, dst: Path) -> None:
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        for block in iter(lambda: fi.read(CHUNK), b""):
            fo.write(block)

