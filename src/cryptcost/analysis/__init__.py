"""Turning stored results into answers: bottlenecks, CPU cost, findings,
measured tuning, the cost model and recommendations.

:func:`analyze` is a pure function of a run's stored results and host, so a
report can be rebuilt from the store at any time. What it knows of a stack
it reads from the facts stored with each result (:func:`facts`), never from
a table of stack names, so a run imported from another host, with stacks
this cryptcost has never heard of, is reported alike.
"""

from __future__ import annotations

import statistics

from dataclasses import asdict, dataclass, field

from cryptcost import stats
from cryptcost.analysis import bottleneck, costmodel, evidence, profile, recommend, scaling
from cryptcost.record import Host, Skipped, Stored, Versus, read
from cryptcost.units import rate, size

GiB = 1 << 30


@dataclass(frozen=True)
class Split:
    """A stack's cost against its reference, split at its twin: reference → twin → stack.
    ``shared``: the share of the cost the twin pays too; ``own``: the stack's own (the crypto);
    ``isolates``: what the twin adds to the reference."""

    stack: str
    workload: str | None
    op: str | None
    block_bytes: int | None
    iodepth: int | None
    cpus: int | None
    reference: str
    twin: str
    isolates: str
    fuse: bool
    reference_bytes_per_s: float
    twin_bytes_per_s: float
    stack_bytes_per_s: float
    total: float
    shared: float
    own: float
    shared_significant: bool | None
    own_significant: bool | None
    note: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        if not self.note:
            del d["note"]
        return d


@dataclass
class Analysis:
    """What :func:`analyze` finds, typed (``model.as_json`` writes it at a JSON boundary)."""

    verdicts: dict[int, bottleneck.Verdict] = field(default_factory=dict)   # index in results →
    cycles_per_byte: dict[int, float] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    tuning: list[str] = field(default_factory=list)
    predictions: list[costmodel.Prediction] = field(default_factory=list)
    recommendations: list[recommend.Recommendation] = field(default_factory=list)
    ranking: list[recommend.Rank] = field(default_factory=list)
    split: list[Split] = field(default_factory=list)            # reference → twin → stack
    # per stack and cell: accel on/off × CPUs
    scaling: list[scaling.Curve] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"verdicts": {str(k): v.to_dict() for k, v in self.verdicts.items()},
                "cycles_per_byte": {str(k): v for k, v in self.cycles_per_byte.items()},
                "findings": self.findings, "tuning": self.tuning,
                "predictions": [p.to_dict() for p in self.predictions],
                "recommendations": [asdict(r) for r in self.recommendations],
                "ranking": [asdict(r) for r in self.ranking],
                "split": [x.to_dict() for x in self.split],
                "scaling": [c.to_dict() for c in self.scaling]}


def analyze(results: list[dict] | list[Stored], host: dict | Host,
            skipped: list[dict] | None = None, *,
            target: float | None = None, target_label: str | None = None) -> Analysis:
    """The analysis of a run's results (stored dicts, read here once, or records) on its host
    (the probe's dict, read here once, or a record)."""
    results, host = read(results), Host.of(host)
    skipped = [Skipped.of(s) for s in skipped or []]
    storage = [r for r in results if r.kind == "storage"]
    ciphers = [r for r in results if r.kind == "cipher"]
    network = [r for r in results if r.kind == "network"]
    index = {r.paired(): r for r in storage + network}
    a = Analysis()
    mhz = host.cpu.mhz
    cores = host.cpu.cores or 1                          # the profile samples every CPU
    for i, r in sorted(enumerate(results), key=lambda x: x[1].kind == "network"):   # storage first
        if r.kind not in ("storage", "network"):
            continue
        base = index.get(r.paired(stack=r.baseline)) if r.baseline else None
        spent = profile.layers(r.profile, frozenset(r.facts.tools))
        if r.kind == "network":
            v = bottleneck.classify_network(r, base, ciphers, host)
            a.verdicts[i] = evidence.with_profile(v, spent, f"{r.stack} {r.cell.workload}",
                                                    cores)
            continue
        if mhz and r.cpu_s_per_gib:
            a.cycles_per_byte[i] = r.cpu_s_per_gib / GiB * mhz * 1e6
        large = index.get(r.paired(block_bytes=1 << 20))
        v = bottleneck.classify(r, base, large, _fuse_baseline(r, index), ciphers, host)
        label = f"{r.stack} {r.cell.op} {size(r.cell.block_bytes)}"
        a.verdicts[i] = evidence.with_profile(v, spent, label, cores)
    a.scaling = scaling.curves(results, a.verdicts, host, skipped)
    a.findings = host_noise(ciphers, storage + network) + findings(storage, ciphers) + \
        network_findings(network) + scaling.findings(a.scaling)
    a.tuning = tuning(storage)
    if target:
        # verdicts are by index in results
        at = [i for i, r in enumerate(results) if r.kind == "storage"]
        a.predictions = costmodel.predict(storage, target, target_label or rate(target),
                                          {j: a.verdicts[i] for j, i in enumerate(at)})
    a.recommendations = recommend.recommend(results, ciphers, skipped, host)
    a.ranking = ranking(storage)
    a.split = split(storage, index)
    return a


def split(storage: list[Stored], index: dict) -> list[Split]:
    """For every stack with a twin between it and its reference (its first
    baseline, when it has two): reference → twin → stack, and how much of its
    cost against the reference the twin pays too (``shared``: FUSE for a
    passthrough on the same FUSE library, ext4's ``encrypt`` feature for
    fscrypt's twin, qemu's export for luks-userspace's) and how much is its
    own (``own``: the crypto). The twin names what it adds (``isolates``)."""
    out = []
    for r in storage:
        bases = r.facts.baselines
        if r.facts.is_baseline or r.bytes_per_s is None or len(bases) < 2:
            continue
        plain = index.get(r.paired(stack=bases[-1]))
        twin = next((b for label in bases[:-1] if (b := index.get(r.paired(stack=label)))), None)
        if not twin or not plain or not plain.bytes_per_s or not twin.bytes_per_s:
            continue
        p, t, s = plain.bytes_per_s, twin.bytes_per_s, r.bytes_per_s
        c = r.cell
        note = (f"{twin.stack} is slower than {r.stack} here: it is no neutral reference for "
                "this operation, so the split is not meaningful") if s > t else ""
        out.append(Split(c.stack, c.workload, c.op, c.block_bytes, c.iodepth, c.cpus, bases[-1],
                         twin.stack, twin.facts.isolates or ("FUSE" if twin.facts.layer == "fuse"
                                                             else twin.stack),
                         r.facts.layer == "fuse", p, t, s, 1 - s / p, 1 - t / p, (t - s) / p,
                         _versus(twin, bases[-1]).significant,
                         _versus(r, twin.stack).significant, note))
    return out


def _versus(r: Stored, base: str) -> Versus:
    """``r`` against its baseline ``base``, empty where it was not compared."""
    return r.vs.get(base) or Versus()


def _fuse_baseline(r: Stored, index: dict) -> Stored | None:
    """For a FUSE stack, its FUSE passthrough's result for the same cell."""
    if r.facts.layer != "fuse" or r.facts.is_baseline:
        return None
    for label in r.facts.baselines:
        b = index.get(r.paired(stack=label))
        if b and b.facts.layer == "fuse":
            return b
    return None


def ranking(storage: list[Stored]) -> list[recommend.Rank]:
    """Encryption options (not baselines), fastest first relative to their
    plaintext reference on 1 MiB sequential I/O; ``rank`` is shared by
    stacks whose difference is not significant (``tie``)."""
    failed = {r.stack for r in storage if r.incomplete}
    stacks = sorted({r.stack for r in storage if r.facts.use_case})
    scored = sorted(((recommend.score(storage, s), s) for s in stacks), key=lambda x: -(x[0] or 0))
    scored = [(v, s) for v, s in scored if v is not None or s not in failed]
    return [recommend.Rank(s, v, rank, tie) for (v, s), (rank, tie)
            in zip(scored, recommend.ranks(storage, [s for _, s in scored]))]


STEADY_CPU = 0.02          # OpenSSL's sample-to-sample CV on a quiet host is well under this


def cpu_noise(ciphers: list[Stored]) -> list[float]:
    """The coefficients of variation of OpenSSL's cipher cells, sorted:
    ``openssl speed`` depends on nothing but the CPU's speed, so their
    spread is the host's noise floor (a shared VM's neighbours, a clock
    that moves)."""
    return sorted(statistics.stdev(v) / statistics.fmean(v) for c in ciphers
                  if c.cell.engine == "openssl" and len(v := c.values) >= 3
                  and statistics.fmean(v) > 0)


def host_noise(ciphers: list[Stored], measured: list[Stored]) -> list[str]:
    """Findings when the CPU itself was not steady during the run: in the
    cipher table's spread, and between the samples of the other results (a
    fixed SHA-256 timed before each sample, ``host_drift``)."""
    out = []
    moved = sorted(r.host_drift for r in measured if (r.host_drift or 0) > stats.HOST_DRIFT)
    if moved:
        out.append(f"{len(moved)} of {len(measured)} storage and network results saw the host's "
                   f"CPU speed move by more than {stats.HOST_DRIFT:.0%} between their samples (up "
                   f"to {moved[-1]:.0%}; a fixed SHA-256 is timed before every sample, "
                   "`host_drift`): their spread is the host's, and their likely cause says so")
    shaky = [m for r in measured if (m := r.memory_noise) and m.cv > stats.STEADY_MEMORY]
    if shaky:
        worst = max(shaky, key=lambda m: m.cv)
        memory_bound = sum(1 for r in measured if "memory bandwidth" in (r.likely_cause or ""))
        out.insert(0, f"the host's memory bandwidth was not steady: {worst.copies} copies of "
                      f"{worst.seconds:g} s each before the first storage sample ran at "
                      f"{rate(worst.low)}–{rate(worst.high)} (CV {worst.cv:.1%}, where a "
                      f"quiet host stays under {stats.STEADY_MEMORY:.0%}; on a VM its neighbours' "
                      "memory traffic moves it even while the CPU is steady). A figure that moves "
                      "data at memory speed (a RAM medium read back, a FUSE passthrough's copies) "
                      "is no steadier"
                      + (f"; {memory_bound} unstable result(s) are no wider than that, and their "
                         "likely cause says so"
                         if memory_bound else ""))
    cvs = cpu_noise(ciphers)
    if len(cvs) < 3 or statistics.median(cvs) <= STEADY_CPU:
        return out
    return [("the CPU's own speed was not steady during this run: OpenSSL's cipher figures, "
             "which depend on "
            "nothing but the CPU, varied from sample to sample by a median "
            f"{statistics.median(cvs):.1%} (coefficient of variation over {len(cvs)} cells; up to "
            f"{cvs[-1]:.0%}), where a quiet host stays under {STEADY_CPU:.0%}. No figure of this "
            "run is steadier than the host: wide intervals here are the host's (a shared or "
            "throttled VM), not the stacks'; overheads, paired with their baselines round by "
            "round, suffer least. Rerun when the host is quiet")] + out


def findings(storage: list[Stored], ciphers: list[Stored]) -> list[str]:
    """Things that behave strangely, measured and said rather than hidden."""
    out = []
    cells = {}
    for r in storage:
        cells.setdefault(r.paired(op=None), {})[r.cell.op] = r
    for key, ops in sorted(cells.items(), key=lambda kv: kv[0].sort_key()):
        stack, workload, bs = key.stack, key.workload, key.block_bytes
        w, rd = ops.get("write"), ops.get("read")
        if w and rd and len(w.values) > 1 and len(rd.values) > 1:
            cmp = stats.compare(w.values, rd.values)
            if cmp.significant and cmp.ratio < 0.9 and not rd.facts.is_baseline:
                out.append(f"{stack} reads ({rate(rd.bytes_per_s)}) slower than it writes "
                           f"({rate(w.bytes_per_s)}) at {size(bs)} {workload}: reads wait "
                           "for decryption synchronously, while writes are encrypted at writeback")
    for r in storage:
        for base, c in r.vs.items():
            if c.significant and c.overhead < -0.05:
                out.append(f"{_short(r)} is {-c.overhead * 100:.0f} % faster than its baseline "
                           f"{base}: the baseline is not a neutral reference for this operation "
                           "(e.g. a passthrough that handles requests less efficiently)")
    void = sorted({(c.cell.engine, c.cell.algorithm) for c in ciphers if c.accel_verified is False})
    for engine, alg in void:
        out.append(f"{engine} {alg}: switching acceleration off did not lower the speed; the "
                   "on/off comparison for it is void")
    for r in storage:
        if r.incomplete:
            out.append(f"{_short(r)}: its series stopped after {r.n} sample(s) ({r.incomplete}); "
                       "they are kept and shown, but the stack is not ranked or "
                       "recommended on them")
    out += first_samples_low(storage) + apart(storage)
    short = sorted({r.stack for r in storage if any("lasted only" in n for n in r.notes)})
    if short:
        n = sum(1 for r in storage if any("lasted only" in x for x in r.notes))
        out.append(f"{n} results ({', '.join(short)}) come from samples shorter than 0.5 s, where "
                   "fio's 1 ms timer and start-up weigh several percent; a larger --size (or the "
                   "standard suite) measures them more precisely")
    return out


FIRST_LOW = 0.95           # a first sample below this share of the later ones' median counts as low


def _short(r: Stored) -> str:
    """A storage result in a few words: ``gocryptfs read 1 MiB``."""
    return f"{r.stack} {r.cell.op} {size(r.cell.block_bytes)}"


def first_samples_low(storage: list[Stored]) -> list[str]:
    """A finding when the first kept samples ran slower than the later ones
    across the run — a shortfall that chance would not line up on one side:
    the warm-up round left something cold that the first full samples met."""
    ratios = sorted((v[0] / statistics.median(v[1:]), _short(r))
                    for r in storage if len(v := r.values) >= 3 and statistics.median(v[1:]) > 0)
    if len(ratios) < 5:
        return []
    middle = statistics.median(x for x, _ in ratios)
    low = [(x, label) for x, label in ratios if x < FIRST_LOW]
    if middle >= FIRST_LOW:
        return []
    worst = ", ".join(f"{label} {x:.2f}" for x, label in low[:3])
    return [f"the first sample ran slower than the later ones in {len(low)} of {len(ratios)} "
            f"storage results (first over the median of the rest: {middle:.2f} across them; lowest "
            f"{worst}): the warm-up round left something cold that the first full-size samples met "
            "(memory the VM had handed back to its host, a daemon's buffers). Those samples are "
            "kept: the median resists one low sample, the interval widens; --warmup 2 discards a "
            "second round"]


APART = 0.05              # two specs that read alike by construction, further apart than this


def apart(storage: list[Stored]) -> list[str]:
    """A finding for each read whose stack declares another whose reads take
    the same path (``reads_like``: bindfs with and without ``big_writes``)
    and that read further apart than :data:`APART`, significantly: the gap
    is the run's, not the stacks', and every overhead taken against either
    carries it."""
    index = {r.paired(): r for r in storage}
    out = []
    for r in storage:
        like = index.get(r.paired(stack=r.facts.reads_like)) if r.facts.reads_like else None
        if r.cell.op != "read" or not like or not r.bytes_per_s or not like.bytes_per_s:
            continue
        cmp = stats.compare(list(like.values), list(r.values))
        if not cmp.significant or abs(cmp.ratio - 1) <= APART:
            continue
        # which copy the run moved, one run cannot tell: every overhead against either carries it
        against = [f"{', '.join(names)} against {b.stack}" for b in (r, like)
                   if (names := sorted({x.stack for x in storage if b.stack in x.vs
                                        and x.paired(stack=b.stack) == b.paired()}))]
        out.append(f"{r.stack} read {rate(r.bytes_per_s)} and {like.stack} "
                   f"{rate(like.bytes_per_s)} at {size(r.cell.block_bytes)} {r.cell.workload} "
                   f"({(cmp.ratio - 1) * 100:+.0f} %, significant), though their reads take the "
                   "same path: the gap is this run's, not the stacks'"
                   + (f", and the overheads of {'; '.join(against)} carry it" if against else ""))
    return out


def network_findings(network: list[Stored]) -> list[str]:
    """What the network results show that a Gbit/s figure hides."""
    out = []
    if network and any(r.shared_cpus for r in network):
        out.append("both ends of every network link ran on this host's CPUs: Gbit/s here is not "
                   "what two hosts would see; CPU-seconds per GB at each end is the figure that "
                   "carries over")
    emulated = sorted({(r.cell.peer, r.emulated_peer) for r in network if r.emulated_peer},
                      key=str)
    for peer, why in emulated:
        out.append(f"end b{' on ' + peer if peer else ''} is cryptcost vm's guest, {why}: the "
                   "Gbit/s across it say what works and how the stacks relate")
    for r in network:
        canary = r.wire.canary if r.wire else None
        if r.facts.is_baseline and canary and canary.verdict == "encrypted":
            out.append(f"the wire check saw no plaintext on the baseline {r.stack}: it cannot be "
                       "trusted on this link")
    return out


def tuning(storage: list[Stored]) -> list[str]:
    """Variants of one stack compared on the same cell: measured tuning advice."""
    out = []
    by_cell: dict = {}
    for r in storage:
        by_cell.setdefault(r.paired(stack=r.stack.split(":")[0]), []).append(r)
    for key, rs in sorted(by_cell.items(), key=lambda kv: kv[0].sort_key()):
        name, workload, op, bs = key.stack, key.workload, key.op, key.block_bytes
        if len(rs) < 2 or bs != 1 << 20:
            continue
        head = f"{name} {workload} {op} {size(bs)}"
        once = sum(len(r.values) < 2 for r in rs)
        if once:
            # a variant's one sample has no spread to test a difference against: said, not ranked
            out.append(f"{head}: {once} of its {len(rs)} variants measured once, not compared "
                       "(a comparison needs 2 samples of each)")
        rs = sorted((r for r in rs if len(r.values) >= 2), key=lambda r: -(r.bytes_per_s or 0))
        for other in rs[1:]:
            cmp = stats.compare(other.values, rs[0].values)
            if cmp.significant:
                out.append(f"{head}: {rs[0].stack} is {(cmp.ratio - 1) * 100:+.0f} % vs "
                           f"{other.stack} on this host")
            else:
                out.append(f"{head}: {rs[0].stack} vs {other.stack}: no significant difference")
    return out
