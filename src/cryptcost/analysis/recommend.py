"""Recommendations: one short reasoned paragraph per use case, from the
measured cost and the security facts. Two options whose difference is
noise are never ranked.

Use cases: whole disk, per-directory, any filesystem / cloud-synced
folder, file sharing, site-to-site tunnel, remote access, service-to-service
TLS (each stack declares its own), and the cipher itself.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from cryptcost import stats
from cryptcost.record import Host, Skipped, Stored
from cryptcost.stacks.base import USE_CASES
from cryptcost.units import pct, rate

# The cells every stack is judged on first: large sequential reads and writes (storage);
# one stream each way, or one large file each way (network).
MAIN = ("seq", 1 << 20)
MAIN_OPS = ("write", "read", "send", "receive", "put", "get")


@dataclass(frozen=True)
class Rank:
    """A stack's place: its 1 MiB sequential throughput relative to its plaintext reference;
    ``tie``: it shares ``rank`` with the stack before, their difference being noise."""

    stack: str
    relative_to_plain: float | None
    rank: int = 0
    tie: bool = False


@dataclass(frozen=True)
class Recommendation:
    """One use case's paragraph, and the stacks it ranked."""

    use_case: str
    title: str
    text: str
    ranking: list[Rank] = field(default_factory=list)


def is_main(r: Stored) -> bool:
    if r.kind == "network":
        return r.cell.workload in MAIN_OPS and (r.cell.streams or 1) == 1
    return r.cell.workload == MAIN[0] and r.cell.block_bytes == MAIN[1]


def _main_cells(results: list[Stored], stack: str) -> list[Stored]:
    """A stack's results on the cells it is ranked on; a series that failed part-way
    (``incomplete``) is shown in the tables but never ranked or recommended."""
    return [r for r in results if r.stack == stack and is_main(r) and r.bytes_per_s
            and not r.incomplete]


def reference(r: Stored) -> str | None:
    """The plainest twin a result is compared with: its last baseline."""
    return r.facts.baselines[-1] if r.facts.baselines else None


def score(results: list[Stored], stack: str) -> float | None:
    """Throughput relative to the plaintext reference on the main cells (1.0 = as fast)."""
    ratios = []
    for r in _main_cells(results, stack):
        vs = r.vs.get(reference(r))
        if vs:
            ratios.append(1 - vs.overhead)
        elif r.facts.is_baseline and not reference(r):
            ratios.append(1.0)
    return statistics.fmean(ratios) if ratios else None


def _compare(results: list[Stored], a: str, b: str, op: str = "read") -> stats.Comparison | None:
    """b against a on the main cell of ``op``."""
    ra = next((r for r in _main_cells(results, a) if r.cell.op == op), None)
    rb = next((r for r in _main_cells(results, b) if r.cell.op == op), None)
    if not ra or not rb or len(ra.values) < 2 or len(rb.values) < 2:
        return None
    return stats.compare(ra.values, rb.values)


def faster_at(results: list[Stored], a: str, b: str) -> tuple[list[str], list[str]]:
    """The main cells (ops) on which ``b`` is significantly faster than
    ``a``, and those on which it is significantly slower."""
    up, down = [], []
    for op in MAIN_OPS:
        c = _compare(results, a, b, op)
        if c is not None and c.significant:
            (up if c.ratio > 1 else down).append(op)
    return up, down


def tied(results: list[Stored], a: str, b: str) -> bool:
    """Whether two stacks cannot be ranked: none of their main cells (1 MiB
    reads and writes; one stream or one file each way) differ significantly
    (or they cannot be compared), or they trade places — each significantly
    faster on one of them (:func:`trade_off`)."""
    up, down = faster_at(results, a, b)
    return not (up and not down or down and not up)


def trade_off(results: list[Stored], a: str, b: str) -> bool:
    """Each of the two is significantly faster on one main cell: neither ranks above the other."""
    up, down = faster_at(results, a, b)
    return bool(up and down)


def ranks(results: list[Stored], ordered: list[str]) -> list[tuple[int, bool]]:
    """(rank, tied) for stacks in score order: a stack that ties with the
    first stack of the rank before it shares that rank; otherwise it starts
    its own. Ties are checked against that first stack, not the one just
    before, so that a chain of ties (A ~ B, B ~ C) never ranks C with an A
    it is significantly slower than."""
    out: list[tuple[int, bool]] = []
    leader = None
    for i, stack in enumerate(ordered):
        if i and tied(results, leader, stack):
            out.append((out[-1][0], True))
        else:
            out.append((i + 1, False))
            leader = stack
    return out


def _trade(results: list[Stored], best: str, other: str) -> str:
    up, down = faster_at(results, best, other)
    return (f"{other} and {best} trade places: {other} is significantly faster at "
            f"{' and '.join(up)}s and slower at {' and '.join(down)}s "
            f"({_describe(results, other)}).")


def _describe(results: list[Stored], stack: str) -> str:
    cells = {r.cell.op: r for r in _main_cells(results, stack)}
    parts = []
    for op in MAIN_OPS:
        r = cells.get(op)
        if r:
            ref = reference(r)
            vs = r.vs.get(ref)
            a, b = r.cpu_s_per_gb.get("a"), r.cpu_s_per_gb.get("b")
            cpu = (f", {a:.2f} + {b:.2f} CPU-s/GB at the two ends"
                   if a is not None and b is not None else "")
            parts.append(f"{op}s {rate(r.bytes_per_s)}" +
                         (f" ({pct(-vs.overhead)} vs {ref}{cpu})" if vs
                          else cpu and f" ({cpu[2:]})"))
    return ", ".join(parts) or "not measured on its main cells"


def recommend(results: list[Stored], ciphers: list[Stored], skipped: list[Skipped],
              host: Host) -> list[Recommendation]:
    """A paragraph per use case measured or asked for, and one on the cipher."""
    # Options are compared as they are deployed: an acceleration-off copy is a measurement, not an
    # option.
    measured = [r for r in results if r.kind in ("storage", "network") and r.cell.accel is not False
                and not r.incomplete]
    use_of = {r.stack: r.facts.use_case for r in measured if r.facts.use_case}
    stacks = sorted(use_of)
    seen = {kind for kind in ("storage", "network")
            if any(r.kind == kind for r in results) or any(s.kind == kind for s in skipped)}
    network_seen = "network" in seen
    out = []
    for use, (kind, title) in USE_CASES.items():
        if kind not in seen and (kind == "network" or seen):
            continue
        mine = [s for s in stacks if use_of[s] == use]
        # a variant with a known weakness (ECB, null encryption, HMAC-MD5 …) is never an option
        # to rank, however fast: it is named with its weakness instead
        warned = {s: w for s in mine for r in measured if r.stack == s
                  and (w := r.weakness)}
        unavailable = [s for s in skipped if s.use_case == use]
        ranked = sorted(((score(measured, s), s) for s in mine if s not in warned),
                        key=lambda x: -(x[0] or 0))
        text = _paragraph(use, ranked, measured, unavailable, warned)
        out.append(Recommendation(use, title, text, [
            Rank(s, v, rk, tie) for (v, s), (rk, tie)
            in zip(ranked, ranks(measured, [s for _, s in ranked]))]))
    out.append(Recommendation("cipher", "Cipher", _cipher_paragraph(ciphers, host)))
    if not network_seen:
        out.append(Recommendation("network", "Network share and VPN",
                                  "Not measured in this run: `cryptcost network` (or a plan with a "
                                  "[network] table) measures TLS, SSH, WireGuard, IPsec and SMB3 "
                                  "against plain TCP."))
    return out


def _paragraph(use: str, ranked: list, storage: list[Stored], unavailable: list[dict],
               warned: dict[str, str]) -> str:
    sentences = []
    cells = ("1 MiB reads or writes" if USE_CASES[use][0] == "storage"
             else "a stream or a file either way")
    if not ranked:
        sentences.append("Every stack measured for this use has a known weakness, so none is "
                         "ranked." if warned else "No stack for this use was measured in this run.")
    else:
        (_, best), rest = ranked[0], ranked[1:]
        if rest and trade_off(storage, best, rest[0][1]):
            sentences.append(f"Measured here, no stack wins on every cell: {best}: "
                             f"{_describe(storage, best)}.")
        elif rest and tied(storage, best, rest[0][1]):
            sentences.append(f"Measured here, {best} and {rest[0][1]} tie for the fastest (no "
                             f"significant difference on {cells}): {best}: "
                             f"{_describe(storage, best)}.")
        elif rest:
            sentences.append(f"Measured here, {best} is the fastest: {_describe(storage, best)}.")
        else:
            sentences.append(f"Only {best} was measured for this use: {_describe(storage, best)}.")
        for sc, other in rest[:3]:
            if trade_off(storage, best, other):
                sentences.append(_trade(storage, best, other))
            elif tied(storage, best, other):
                sentences.append(f"{other} is not significantly different from {best} "
                                 f"({_describe(storage, other)}).")
            else:
                sentences.append(f"{other}: {_describe(storage, other)}.")
        for _, s in ranked:
            for fact in next((r.facts.security for r in storage if r.stack == s), ()):
                fact = fact[0].upper() + fact[1:] + ("" if fact.endswith(".") else ".")
                if fact not in sentences:
                    sentences.append(fact)
    sentences += [f"Avoid {s}, left out of the ranking: {w}." for s, w in sorted(warned.items())]
    for u in unavailable:       # once each: several parts of a suite skip the same stack
        said = f"{u.stack} could not be measured here ({u.reason}); {u.advice}."
        if u.advice and said not in sentences:
            sentences.append(said)
    return " ".join(sentences)


def _cipher_paragraph(ciphers: list[Stored], host: Host) -> str:
    def best(alg: str) -> Stored | None:
        rs = [c for c in ciphers if c.cell.algorithm == alg and c.cell.accel and c.cell.threads == 1
              and c.cell.engine == "openssl" and c.bytes_per_s]
        return max(rs, key=lambda c: c.cell.buffer_bytes) if rs else None
    gcm, chacha, xts = (best("aes-256-gcm") or best("aes-128-gcm"), best("chacha20-poly1305"),
                        best("aes-256-xts"))
    has_aes = host.cpu.flags.get("aes")
    parts = []
    if gcm and chacha:
        cmp = stats.compare(chacha.values or [chacha.bytes_per_s], gcm.values or [gcm.bytes_per_s])
        faster = "AES-GCM" if gcm.bytes_per_s > chacha.bytes_per_s else "ChaCha20-Poly1305"
        if cmp.significant:
            parts.append(f"For authenticated encryption {faster} is faster here "
                         f"({gcm.cell.algorithm} {rate(gcm.bytes_per_s)} vs chacha20-poly1305 "
                         f"{rate(chacha.bytes_per_s)} at {gcm.cell.buffer_bytes} B, one thread).")
        else:
            parts.append("AES-GCM and ChaCha20-Poly1305 show no significant difference here.")
    if xts:
        parts.append(f"AES-256-XTS, the disk-encryption mode, runs at {rate(xts.bytes_per_s)} "
                     "in OpenSSL on one core.")
    if has_aes is False:
        parts.append("This CPU has no AES-NI: prefer ChaCha20-Poly1305 and Adiantum.")
    parts.append("ECB leaks patterns; LRW is deprecated; DES, 3DES and Blowfish are obsolete "
                 "(64-bit blocks).")
    return " ".join(parts) if parts else "No cipher results in this run."
