"""The answer a person acts on: per use, each option measured for it — what it would do on this
host's own disks and links, how much of its cost is the encryption's own, what limits it, its
CPU per GB — and the pick; then what to change, ranked by what the run shows it would win.

A disk's or a link's figure is predicted by the cost model (:func:`cryptcost.analysis.costmodel.
on`) from the option's cell measured here (a RAM medium, a link between two namespaces) and the
place's speed (a disk's sequential read timed read-only, a link's rate as its driver reports it,
or one the person named with ``--device-speed`` or ``--link``): a range, said to be a
prediction. What to change is only what a ratio of this run supports: a variant of the same
stack measured faster, or a kernel stack whose cipher runs in software, bounded by its twin (the
same stack without its cipher).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cryptcost import stats
from cryptcost.analysis import costmodel, recommend
from cryptcost.analysis.bottleneck import Verdict, kernel_aes_is_software
from cryptcost.record import Host, Stored
from cryptcost.stacks.base import USE_CASES
from cryptcost.units import parse_device_speed, parse_link

CHECKED = ("a predicted figure is the cost model's range (crypto and I/O taking turns, or "
           "overlapping) from the option's speed measured here and the place's; the model is "
           "held within 20 % of its range against a medium throttled to a device's speed "
           "(tests/system/test_answer_real.py, bench/costmodel_vs_throttled)")
OPS = ("write", "read", "send", "receive", "put", "get")
GB = 1e9


@dataclass(frozen=True)
class Place:
    """A disk or link an option is predicted on: its name, what it is, its speed (bytes/s)."""

    name: str
    kind: str                       # storage or network
    said: str
    bytes_per_s: float
    named: bool = False             # named by the person (--device-speed, --link), not found


@dataclass(frozen=True)
class Predicted:
    place: str
    op: str                         # the op that binds there (the slower of the two)
    low: float
    high: float


@dataclass(frozen=True)
class Option:
    use: str
    stack: str
    here: tuple[tuple[str, float], ...]     # (op, bytes/s) as measured here
    plain: tuple[tuple[str, float], ...]    # (op, bytes/s) of its reference, the same cells
    on: tuple[Predicted, ...]
    own: float | None               # the encryption's own share of its cost against plain
    other: str                      # what else costs, and its share: "FUSE (libfuse 3) 62 %"
    limit: str                      # the verdict, in a few words
    cpu_s_per_gb: float | None
    pick: bool = False
    cpus: int | None = None         # its cells' CPU count where the run pinned every pass


@dataclass(frozen=True)
class Use:
    use: str
    title: str
    options: tuple[Option, ...]
    pick: str | None                # None: the first two tie
    why: str                        # the pick's lead and its speed against plain
    fact: str = ""                  # the first security fact the pick must repeat


@dataclass(frozen=True)
class Change:
    action: str
    win: float                      # the factor it would win at most, as measured
    evidence: str


@dataclass(frozen=True)
class Answer:
    places: tuple[Place, ...]
    uses: tuple[Use, ...]
    changes: tuple[Change, ...] = ()
    notes: tuple[str, ...] = ()     # what could not be timed or known, and how to name it
    checked: str = CHECKED


def places(disks: list[dict], links: list[dict], model: dict) -> tuple[list[Place], list[str]]:
    """The places options are predicted on — each disk timed, each link with a speed, the
    device or link the person named — and a note for each that is not one, and why."""
    out, notes = [], []
    for d in disks:
        if d.get("read_bytes_per_s"):
            spins = {True: "rotational", False: "solid-state"}.get(d.get("rotational"), "")
            out.append(Place(d["name"], "storage", f"{d.get('model') or 'disk'}"
                             f"{', ' + spins if spins else ''}, {d.get('size', 0) / 1e9:.0f} GB",
                             d["read_bytes_per_s"]))
        else:
            notes.append(f"disk {d.get('name')}: {d.get('how') or 'not timed'}")
    for link in links:
        if link.get("bytes_per_s"):
            out.append(Place(link["name"], "network", "as its driver reports",
                             link["bytes_per_s"]))
        else:
            notes.append(f"link {link.get('name')} ({link.get('driver') or 'no driver'}) reports "
                         "no speed: --link 1GbE names one")
    if model.get("device_speed"):
        out.append(Place(model["device_speed"], "storage", "named with --device-speed",
                         parse_device_speed(model["device_speed"]), named=True))
    if model.get("link") and not str(model["link"]).startswith("peer:"):
        out.append(Place(model["link"], "network", "named with --link",
                         parse_link(model["link"]), named=True))
    return out, notes


def _main(results: list[Stored], stack: str) -> dict[str, Stored]:
    """A stack's main cells (1 MiB sequential, one stream) as deployed: op → result; on every
    CPU, else (a run that pinned every pass) on the most CPUs it measured."""
    mine = [r for r in results if r.stack == stack and recommend.is_main(r)
            and r.bytes_per_s and not r.incomplete and r.cell.accel is not False
            and r.cell.op in OPS]
    counts = {r.cell.cpus for r in mine}
    most = None if None in counts or not counts else max(counts)
    return {r.cell.op: r for r in mine if r.cell.cpus == most}


def option(use: str, stack: str, results: list[Stored], verdicts: dict[int, Verdict],
           split: list, where: list[Place]) -> Option | None:
    """One option's row, or None where its main cells were not measured."""
    cells = _main(results, stack)
    if not cells:
        return None
    ops = [op for op in OPS if op in cells]
    base_of = {r.paired(): r for r in results}
    plain = {}
    for op in ops:
        ref = recommend.reference(cells[op])
        if ref and (b := base_of.get(cells[op].paired(stack=ref))) and b.bytes_per_s:
            plain[op] = b.bytes_per_s
    on = []
    for place in where:
        if place.kind != cells[ops[0]].kind:
            continue
        low, high, op = min((*costmodel.on(cells[op].bytes_per_s, plain.get(op),
                                           place.bytes_per_s), op) for op in ops)
        on.append(Predicted(place.name, op, low, high))
    slower = min(cells.values(), key=lambda r: r.bytes_per_s)
    index = {id(r): i for i, r in enumerate(results)}
    v = verdicts.get(index.get(id(slower), -1))
    own, other = _split(stack, split)
    cpu = (slower.cpu_s_per_gib / 1.073741824 if slower.cpu_s_per_gib else None) \
        if slower.kind == "storage" else slower.cpu_s_per_gb.get("system")
    limit = f"{v.bottleneck} ({slower.cell.op})" if v else "—"
    return Option(use, stack, tuple((op, cells[op].bytes_per_s) for op in ops),
                  tuple(plain.items()), tuple(on), own, other, limit, cpu,
                  cpus=cells[ops[0]].cell.cpus)


def _split(stack: str, split: list) -> tuple[float | None, str]:
    """The encryption's own share of a stack's cost against plain on its main cells, and what
    else costs (the twin's layer, with its share); (None, "") without a twin."""
    mine = [x for x in split if x.stack == stack and x.block_bytes == 1 << 20 and x.total > 0
            and not x.note]
    if not mine:
        return None, ""
    own = min(1.0, max(0.0, sum(x.own for x in mine) / sum(x.total for x in mine)))
    return own, f"{mine[0].isolates} {1 - own:.0%}"


def changes(results: list[Stored], host: Host, split: list) -> list[Change]:
    """What to change, each from a ratio the run measured, the largest win first."""
    out = []
    families: dict[str, list[str]] = {}
    for r in results:
        if r.stack and r.facts.use_case and recommend.is_main(r) and r.cell.accel is not False:
            family = families.setdefault(r.stack.split(":")[0], [])
            if r.stack not in family:
                family.append(r.stack)
    for variants in families.values():
        out += _variants(results, variants)
    seen = set()
    for x in split:
        r = next((r for r in results if r.stack == x.stack and r.cell.op == x.op
                  and recommend.is_main(r)), None)
        if r is None or x.stack in seen or r.facts.layer != "kernel":
            continue
        soft, driver = kernel_aes_is_software(host, r)
        if soft and x.stack_bytes_per_s and x.twin_bytes_per_s > x.stack_bytes_per_s:
            seen.add(x.stack)
            out.append(Change(
                f"{x.stack}: load the CPU's AES driver (modprobe aesni_intel): this kernel's AES "
                f"is software ({driver})", x.twin_bytes_per_s / x.stack_bytes_per_s,
                f"at most its twin {x.twin}'s {x.op} speed, where its cipher would cost nothing"))
    return sorted(out, key=lambda c: -c.win)


def _variants(results: list[Stored], variants: list[str]) -> list[Change]:
    """A variant of a stack measured significantly faster than another on every main op."""
    out = []
    cells = {v: _main(results, v) for v in variants}
    for fast in variants:
        for slow in variants:
            ops = [op for op in cells[fast] if op in cells[slow]]
            if fast == slow or not ops:
                continue
            wins = []
            for op in ops:
                a, b = cells[slow][op], cells[fast][op]
                cmp = stats.compare(list(a.values), list(b.values)) \
                    if len(a.values) > 1 and len(b.values) > 1 else None
                if cmp is None or not (cmp.significant and cmp.ratio > 1):
                    break
                wins.append(cmp.ratio)
            else:
                out.append(Change(f"{fast} rather than {slow}", min(wins),
                                  f"measured here, {' and '.join(ops)}, significant"))
    return out


def _cipher_use(results: list[Stored], text: str) -> Use | None:
    """The cipher as a use: each algorithm OpenSSL ran on one core, accelerated, at its
    largest buffer, fastest first."""
    best: dict[str, Stored] = {}
    for c in results:
        if c.kind == "cipher" and c.cell.engine == "openssl" and c.cell.accel is not False \
                and (c.cell.threads or 1) == 1 and c.bytes_per_s:
            old = best.get(c.cell.algorithm)
            if old is None or (c.cell.buffer_bytes or 0) > (old.cell.buffer_bytes or 0):
                best[c.cell.algorithm] = c
    if not best:
        return None
    ranked = sorted(best.values(), key=lambda c: -c.bytes_per_s)
    opts = tuple(Option("cipher", c.cell.algorithm, (("encrypt", c.bytes_per_s),), (), (), None,
                        "", "one core", GB / c.bytes_per_s, pick=i == 0)
                 for i, c in enumerate(ranked))
    return Use("cipher", "Cipher", opts, ranked[0].cell.algorithm,
               f"{ranked[0].cell.algorithm}, the fastest on one core here",
               text.split(". ")[0].rstrip(".") if text else "")


def answer(results: list[Stored], verdicts: dict[int, Verdict], split: list,
           recommendations: list, host: Host, disks: list[dict], links: list[dict],
           model: dict) -> Answer:
    """The answer, per use, from a run's results and their analysis."""
    where, notes = places(disks, links, model)
    uses = []
    for rec in recommendations:
        if rec.use_case == "cipher":
            if (u := _cipher_use(results, rec.text)) is not None:
                uses.append(u)
            continue
        if rec.use_case not in USE_CASES or not rec.ranking:
            continue
        opts = [o for rank in rec.ranking
                if (o := option(rec.use_case, rank.stack, results, verdicts, split, where))]
        if not opts:
            continue
        tied = len(rec.ranking) > 1 and rec.ranking[1].tie
        pick = None if tied else rec.ranking[0].stack
        uses.append(Use(rec.use_case, rec.title,
                        tuple(replace(o, pick=o.stack == pick) for o in opts), pick,
                        *_why(rec.ranking, results, opts[0], where)))
    if not any(p.kind == "storage" for p in where) and not disks:
        notes.append("no disk was timed: cryptcost run times each one read-only, as root; "
                     "--device-speed 550MB/s names one")
    return Answer(tuple(where), tuple(uses), tuple(changes(results, host, split)), tuple(notes))


def _why(ranking: list, results: list[Stored], first: Option, where: list[Place]
         ) -> tuple[str, str]:
    """The pick's lead and what it keeps of plain's speed — on the first place it is predicted
    on where there is one, else as measured here — in a clause; and the first security fact it
    must repeat."""
    top = ranking[0]
    if len(ranking) > 1 and ranking[1].tie:
        lead = f"{top.stack} ties {ranking[1].stack} (no significant difference)"
    elif len(ranking) > 1:
        lead = f"{top.stack}, the fastest measured"
    else:
        lead = f"{top.stack}, the only one measured"
    rel = f"; {top.relative_to_plain:.0%} of plain's speed here" if top.relative_to_plain else ""
    at = first.on[0] if first.on else None
    plain = dict(first.plain).get(at.op) if at else None
    if at and plain:
        speed = next(p.bytes_per_s for p in where if p.name == at.place)
        base = min(speed, plain)
        keeps = f"{at.low / base:.0%}" if round(at.low / base, 2) == round(at.high / base, 2) \
            else f"{at.low / base:.0%}–{at.high / base:.0%}"
        rel = (f"; on {at.place} {keeps} of plain's {at.op} speed, "
               + ("disk-bound" if at.high >= speed * 0.999 else "encryption-bound"))
    fact = next((r.facts.security[0] for r in results if r.stack == top.stack
                 and r.facts.security), "")
    return lead + rel, fact
