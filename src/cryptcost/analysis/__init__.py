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

from dataclasses import dataclass, field

from cryptcost import stats
from cryptcost.analysis import bottleneck, costmodel, profile, recommend, scaling
from cryptcost.analysis.cells import cell, facts, is_baseline  # noqa: F401 (the package's API)
from cryptcost.units import rate, size

GiB = 1 << 30
@dataclass
class Analysis:
    verdicts: dict[int, dict] = field(default_factory=dict)      # index in results → verdict
    cycles_per_byte: dict[int, float] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    tuning: list[str] = field(default_factory=list)
    predictions: list[dict] = field(default_factory=list)
    recommendations: list[dict] = field(default_factory=list)
    ranking: list[dict] = field(default_factory=list)
    split: list[dict] = field(default_factory=list)            # reference → twin → stack
    scaling: list[dict] = field(default_factory=list)          # per stack and cell: accel on/off × CPUs

    def to_dict(self) -> dict:
        return {"verdicts": {str(k): v for k, v in self.verdicts.items()},
                "cycles_per_byte": {str(k): v for k, v in self.cycles_per_byte.items()},
                "findings": self.findings, "tuning": self.tuning, "predictions": self.predictions,
                "recommendations": self.recommendations, "ranking": self.ranking,
                "split": self.split, "scaling": self.scaling}


def analyze(results: list[dict], host: dict, skipped: list[dict] | None = None, *,
            target: float | None = None, target_label: str | None = None) -> Analysis:
    storage = [r for r in results if r.get("kind") == "storage"]
    ciphers = [r for r in results if r.get("kind") == "cipher"]
    index = {cell(r): r for r in storage}
    a = Analysis()
    mhz = host.get("cpu", {}).get("mhz")
    for i, r in enumerate(results):
        if r.get("kind") != "storage":
            continue
        if mhz and r.get("cpu_s_per_gib"):
            a.cycles_per_byte[i] = r["cpu_s_per_gib"] / GiB * mhz * 1e6
        base = index.get(cell(r, stack=r["baseline"])) if r.get("baseline") else None
        large = index.get(cell(r, block_bytes=1 << 20))
        v = bottleneck.classify(r, base, large, _fuse_baseline(r, index), ciphers, host)
        spent = profile.layers(r.get("profile"), frozenset(facts(r).get("tools") or ()))
        a.verdicts[i] = bottleneck.with_profile(v, spent, f"{r['stack']} {r['op']} {size(r['block_bytes'])}").to_dict()
    network = [r for r in results if r.get("kind") == "network"]
    net_index = {cell(r): r for r in network}
    for i, r in enumerate(results):
        if r.get("kind") == "network":
            base = net_index.get(cell(r, stack=r["baseline"])) if r.get("baseline") else None
            v = bottleneck.classify_network(r, base, ciphers, host)
            spent = profile.layers(r.get("profile"), frozenset(facts(r).get("tools") or ()))
            a.verdicts[i] = bottleneck.with_profile(v, spent, f"{r['stack']} {r['workload']}").to_dict()
    a.scaling = scaling.curves(results, a.verdicts, host, skipped)
    a.findings = host_noise(ciphers, storage + network) + findings(storage, ciphers) + \
        network_findings(network) + scaling.findings(a.scaling)
    a.tuning = tuning(storage)
    if target:
        at = [i for i, r in enumerate(results) if r.get("kind") == "storage"]     # verdicts are by index in results
        a.predictions = [p.to_dict() for p in costmodel.predict(
            storage, target, target_label or rate(target), {j: a.verdicts[i] for j, i in enumerate(at)})]
    a.recommendations = recommend.recommend(results, ciphers, skipped or [], host)
    a.ranking = ranking(storage)
    a.split = split(storage, index)
    return a


def split(storage: list[dict], index: dict) -> list[dict]:
    """For every stack with a twin between it and its reference (its first
    baseline, when it has two): reference → twin → stack, and how much of its
    cost against the reference the twin pays too (``shared``: FUSE for a
    passthrough on the same FUSE library, ext4's ``encrypt`` feature for
    fscrypt's twin, qemu's export for luks-userspace's) and how much is its
    own (``own``: the crypto). The twin names what it adds (``isolates``)."""
    out = []
    for r in storage:
        bases = facts(r).get("baselines") or []
        if is_baseline(r) or "median_bytes_per_s" not in r or len(bases) < 2:
            continue
        plain = index.get(cell(r, stack=bases[-1]))
        twin = next((b for label in bases[:-1] if (b := index.get(cell(r, stack=label)))), None)
        if not twin or not plain or not plain.get("median_bytes_per_s") or not twin.get("median_bytes_per_s"):
            continue
        p, t, s = plain["median_bytes_per_s"], twin["median_bytes_per_s"], r["median_bytes_per_s"]
        tf = facts(twin)
        row = {"stack": r["stack"], "workload": r["workload"], "op": r["op"], "block_bytes": r["block_bytes"],
               "iodepth": r["iodepth"], "cpus": r.get("cpus"), "reference": bases[-1], "twin": twin["stack"],
               "isolates": tf.get("isolates") or ("FUSE" if tf.get("layer") == "fuse" else twin["stack"]),
               "fuse": facts(r).get("layer") == "fuse",
               "reference_bytes_per_s": p, "twin_bytes_per_s": t, "stack_bytes_per_s": s,
               "total": 1 - s / p, "shared": 1 - t / p, "own": (t - s) / p,
               "shared_significant": ((twin.get("vs") or {}).get(bases[-1]) or {}).get("significant"),
               "own_significant": ((r.get("vs") or {}).get(twin["stack"]) or {}).get("significant")}
        if s > t:
            row["note"] = (f"{twin['stack']} is slower than {r['stack']} here: it is no neutral reference "
                           "for this operation, so the split is not meaningful")
        out.append(row)
    return out


def _fuse_baseline(r: dict, index: dict) -> dict | None:
    """For a FUSE stack, its FUSE passthrough's result for the same cell."""
    if facts(r).get("layer") != "fuse" or is_baseline(r):
        return None
    for label in facts(r).get("baselines", []):
        b = index.get(cell(r, stack=label))
        if b and facts(b).get("layer") == "fuse":
            return b
    return None


def ranking(storage: list[dict]) -> list[dict]:
    """Encryption options (not baselines), fastest first relative to their
    plaintext reference on 1 MiB sequential I/O; ``rank`` is shared by
    stacks whose difference is not significant (``tie``)."""
    failed = {r["stack"] for r in storage if r.get("incomplete")}
    stacks = sorted({r["stack"] for r in storage if facts(r).get("use_case")})
    rows = sorted(({"stack": s, "relative_to_plain": recommend.score(storage, s)} for s in stacks),
                  key=lambda x: -(x["relative_to_plain"] or 0))
    rows = [x for x in rows if x["relative_to_plain"] is not None or x["stack"] not in failed]
    for row, (rank, tie) in zip(rows, recommend.ranks(storage, [x["stack"] for x in rows])):
        row.update(rank=rank, tie=tie)
    return rows


STEADY_CPU = 0.02          # OpenSSL's sample-to-sample CV on a quiet host is well under this


def cpu_noise(ciphers: list[dict]) -> list[float]:
    """The coefficients of variation of OpenSSL's cipher cells, sorted:
    ``openssl speed`` depends on nothing but the CPU's speed, so their
    spread is the host's noise floor (a shared VM's neighbours, a clock
    that moves)."""
    return sorted(statistics.stdev(v) / statistics.fmean(v) for c in ciphers
                  if c.get("engine") == "openssl" and len(v := c.get("values") or []) >= 3 and statistics.fmean(v) > 0)


def host_noise(ciphers: list[dict], measured: list[dict]) -> list[str]:
    """Findings when the CPU itself was not steady during the run: in the
    cipher table's spread, and between the samples of the other results (a
    fixed SHA-256 timed before each sample, ``host_drift``)."""
    out = []
    moved = sorted(r["host_drift"] for r in measured if (r.get("host_drift") or 0) > stats.HOST_DRIFT)
    if moved:
        out.append(f"{len(moved)} of {len(measured)} storage and network results saw the host's CPU speed move by "
                   f"more than {stats.HOST_DRIFT:.0%} between their samples (up to {moved[-1]:.0%}; a fixed "
                   "SHA-256 is timed before every sample, `host_drift`): their spread is the host's, and their "
                   "likely cause says so")
    shaky = [m for r in measured if (m := (r.get("params") or {}).get("memory_noise"))
             and (m.get("cv") or 0) > stats.STEADY_MEMORY]
    if shaky:
        worst = max(shaky, key=lambda m: m["cv"])
        memory_bound = sum(1 for r in measured if "memory bandwidth" in (r.get("likely_cause") or ""))
        out.insert(0, f"the host's memory bandwidth was not steady: {worst['copies']} copies of "
                      f"{worst['seconds']:g} s each before the first storage sample ran at "
                      f"{rate(worst['low'])}–{rate(worst['high'])} (CV {worst['cv']:.1%}, where a quiet "
                      f"host stays under {stats.STEADY_MEMORY:.0%}; on a VM its neighbours' memory traffic moves it even "
                      "while the CPU is steady). A figure that moves data "
                      "at memory speed (a RAM medium read back, a FUSE passthrough's copies) is no steadier"
                      + (f"; {memory_bound} unstable result(s) are no wider than that, and their likely cause says so"
                         if memory_bound else ""))
    cvs = cpu_noise(ciphers)
    if len(cvs) < 3 or statistics.median(cvs) <= STEADY_CPU:
        return out
    return [(f"the CPU's own speed was not steady during this run: OpenSSL's cipher figures, which depend on "
            f"nothing but the CPU, varied from sample to sample by a median {statistics.median(cvs):.1%} "
            f"(coefficient of variation over {len(cvs)} cells; up to {cvs[-1]:.0%}), where a quiet host stays "
            f"under {STEADY_CPU:.0%}. No figure of this run is steadier than the host: wide intervals here are "
            "the host's (a shared or throttled VM), not the stacks'; overheads, paired with their baselines round "
            "by round, suffer least. Rerun when the host is quiet")] + out


def findings(storage: list[dict], ciphers: list[dict]) -> list[str]:
    """Things that behave strangely, measured and said rather than hidden."""
    out = []
    cells = {}
    for r in storage:
        cells.setdefault(cell(r, op=None), {})[r["op"]] = r
    for key, ops in sorted(cells.items(), key=lambda kv: kv[0].sort_key()):
        stack, workload, bs = key.stack, key.workload, key.block_bytes
        w, rd = ops.get("write"), ops.get("read")
        if w and rd and len(w.get("values", [])) > 1 and len(rd.get("values", [])) > 1:
            cmp = stats.compare(w["values"], rd["values"])
            if cmp.significant and cmp.ratio < 0.9 and not is_baseline(rd):
                out.append(f"{stack} reads ({rate(rd['median_bytes_per_s'])}) slower than it writes "
                           f"({rate(w['median_bytes_per_s'])}) at {size(bs)} {workload}: reads wait "
                           "for decryption synchronously, while writes are encrypted at writeback")
    for r in storage:
        for base, c in (r.get("vs") or {}).items():
            if c["significant"] and c["overhead"] < -0.05:
                out.append(f"{r['stack']} {r['op']} {size(r['block_bytes'])} is {-c['overhead'] * 100:.0f} % "
                           f"faster than its baseline {base}: the baseline is not a neutral reference "
                           "for this operation (e.g. a passthrough that handles requests less efficiently)")
    void = sorted({(c["engine"], c["algorithm"]) for c in ciphers if c.get("accel_verified") is False})
    for engine, alg in void:
        out.append(f"{engine} {alg}: switching acceleration off did not lower the speed; the on/off "
                   "comparison for it is void")
    for r in storage:
        if r.get("incomplete"):
            out.append(f"{r['stack']} {r['op']} {size(r['block_bytes'])}: its series failed after {r['samples']} "
                       f"sample(s) ({r['incomplete']}); they are kept and shown, but the stack is not ranked "
                       "or recommended on them")
    out += first_samples_low(storage)
    short = sorted({r["stack"] for r in storage if any("lasted only" in n for n in r.get("notes", []))})
    if short:
        n = sum(1 for r in storage if any("lasted only" in x for x in r.get("notes", [])))
        out.append(f"{n} results ({', '.join(short)}) come from samples shorter than 0.5 s, where fio's "
                   "1 ms timer and start-up weigh several percent; a larger --size (or the standard "
                   "suite) measures them more precisely")
    return out


FIRST_LOW = 0.95           # a first sample below this share of the later ones' median counts as low


def first_samples_low(storage: list[dict]) -> list[str]:
    """A finding when the first kept samples ran slower than the later ones
    across the run — a shortfall that chance would not line up on one side:
    the warm-up round left something cold that the first full samples met."""
    ratios = sorted((v[0] / statistics.median(v[1:]), f"{r['stack']} {r['op']} {size(r['block_bytes'])}")
                    for r in storage if len(v := r.get("values") or []) >= 3 and statistics.median(v[1:]) > 0)
    if len(ratios) < 5:
        return []
    middle = statistics.median(x for x, _ in ratios)
    low = [(x, label) for x, label in ratios if x < FIRST_LOW]
    if middle >= FIRST_LOW:
        return []
    worst = ", ".join(f"{label} {x:.2f}" for x, label in low[:3])
    return [f"the first sample ran slower than the later ones in {len(low)} of {len(ratios)} storage results "
            f"(first over the median of the rest: {middle:.2f} across them; lowest {worst}): the warm-up round "
            "left something cold that the first full-size samples met (memory the VM had handed back to its host, "
            "a daemon's buffers). Those samples are kept: the median resists one low sample, the interval widens; "
            "--warmup 2 discards a second round"]


def network_findings(network: list[dict]) -> list[str]:
    """What the network results show that a Gbit/s figure hides."""
    out = []
    if network and any(r.get("shared_cpus") for r in network):
        out.append("both ends of every network link ran on this host's CPUs: Gbit/s here is not what two "
                   "hosts would see; CPU-seconds per GB at each end is the figure that carries over")
    for r in network:
        canary = (r.get("wire") or {}).get("canary") or {}
        if facts(r).get("role") == "baseline" and canary.get("verdict") == "encrypted":
            out.append(f"the wire check saw no plaintext on the baseline {r['stack']}: it cannot be trusted "
                       "on this link")
    return out


def tuning(storage: list[dict]) -> list[str]:
    """Variants of one stack compared on the same cell: measured tuning advice."""
    out = []
    by_cell: dict = {}
    for r in storage:
        by_cell.setdefault(cell(r, stack=r["stack"].split(":")[0]), []).append(r)
    for key, rs in sorted(by_cell.items(), key=lambda kv: kv[0].sort_key()):
        name, workload, op, bs = key.stack, key.workload, key.op, key.block_bytes
        if len(rs) < 2 or bs != 1 << 20:
            continue
        rs = sorted(rs, key=lambda r: -r["median_bytes_per_s"] if "median_bytes_per_s" in r else 0)
        top = rs[0]
        for other in rs[1:]:
            if len(top.get("values", [])) < 2 or len(other.get("values", [])) < 2:
                continue
            cmp = stats.compare(other["values"], top["values"])
            if cmp.significant:
                out.append(f"{name} {workload} {op} {size(bs)}: {top['stack']} is "
                           f"{(cmp.ratio - 1) * 100:+.0f} % vs {other['stack']} on this host")
            else:
                out.append(f"{name} {workload} {op} {size(bs)}: {top['stack']} vs {other['stack']}: "
                           "no significant difference")
    return out
