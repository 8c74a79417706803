"""Each field report's conclusions, claim by claim, judged from a run: holds, does not hold, or
cannot say here and why.

A claim (``[[claims]]`` in ``report/seeds/RN.toml``) is one thing a report concludes, stated in
our words, with a few of its own words (``quote``, in its language) that find it in its text;
the comparison that tests it: side ``a`` against each of ``b`` (one side, or several: "the
slowest of the four"), on the cells they share (``cell``, and at each value of ``each`` where
it names a dimension and its values); and its rule:

- ``faster`` / ``slower``: ``a`` is significantly faster (slower) than ``b``;
- ``same``: their ratio's 95 % interval lies within ±``value`` of 1;
- ``at_most`` / ``at_least``: the ratio ``a``/``b``'s interval is at most (at least) ``value``;
- ``between``: the ratio's interval lies between its two values.

A rule of an interval holds where the whole interval meets it, does not hold where none of it
does, and cannot be said where it straddles the line.

Comparability is a rule, not a word: both sides of a comparison come from one run on one host
(this host's, or one guest run's: never one of each); a claim about what a cipher or an
implementation costs (``cost = true``) is not judged from cells measured under emulation, whose
CPU is software; a claim made under a condition (``needs``: a real network, ``link =
"peer"``) is judged only from cells measured under it. Where a claim cannot be judged, it says
why (not measured; not comparable; the samples cannot tell) and what would settle it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptcost import stats
from cryptcost.record import Stored
from cryptcost.report import cells

RULES = ("faster", "slower", "same", "at_most", "at_least", "between")
HOLDS, DOES_NOT, CANNOT = "holds", "does not hold", "cannot say"
VERDICTS = (HOLDS, DOES_NOT, CANNOT)
EMULATED = ("measured only in cryptcost vm's emulated guest, whose CPU is software (TCG): what a "
            "cipher or an implementation costs there says nothing of any hardware's")


@dataclass(frozen=True)
class Claim:
    id: str
    claim: str                    # ours, in English
    quote: str                    # a few of their words, to find the claim in their text
    rule: str
    cell: dict
    a: dict
    b: tuple[dict, ...]
    value: tuple[float, ...] = ()
    cost: bool = False            # about what a cipher or an implementation costs
    each: tuple[tuple[str, tuple], ...] = ()      # a dimension and the values it is judged at
    needs: dict | None = None     # what the cells must have been measured under
    settle: str = ""              # what would settle it where the run cannot
    metric: str = "throughput"    # or "cpu": CPU-seconds per byte, by the series' means


def parse(label: str, d: dict, known: set[str]) -> Claim:
    """One ``[[claims]]`` table, checked (a ValueError names the claim and what is wrong)."""
    b = d["b"] if isinstance(d["b"], list) else [d["b"]]
    value = d.get("value", [])
    value = tuple(value if isinstance(value, list) else [value])
    each = tuple((k, tuple(v)) for k, v in (d.get("each") or {}).items())
    dims = set(d.get("cell", {})) | set(d["a"]) | {k for side in b for k in side} | {
        k for k, _ in each} | set(d.get("needs") or {})
    wrong = [f"rule {d['rule']!r}"] if d["rule"] not in RULES else []
    wrong += [f"dimensions {sorted(dims - known)}"] if dims - known else []
    need = {"same": 1, "at_most": 1, "at_least": 1, "between": 2}.get(d["rule"], 0)
    wrong += [f"{need} value(s) for {d['rule']}"] if len(value) != need else []
    wrong += ["no quote"] if not d.get("quote") else []
    if wrong or d.get("metric", "throughput") not in ("throughput", "cpu"):
        raise ValueError(f"{label}: claim {d.get('id')}: {', '.join(wrong) or 'bad metric'}")
    return Claim(f"{label}.{d['id']}", d["claim"], d["quote"], d["rule"], d.get("cell", {}),
                 d["a"], tuple(b), value, bool(d.get("cost")), each, d.get("needs"),
                 d.get("settle", ""), d.get("metric", "throughput"))


def rule_said(c: Claim) -> str:
    """The rule in words: ``faster``, ``within ±10 %``, ``at most 0.61×``, ``1.45–2.00×``."""
    v = c.value
    return {"faster": "significantly faster", "slower": "significantly slower",
            "same": f"within ±{v[0] * 100:.0f} %" if v else "",
            "at_most": f"at most {v[0]:.2f}×" if v else "",
            "at_least": f"at least {v[0]:.2f}×" if v else "",
            "between": f"{v[0]:.2f}–{v[1]:.2f}×" if len(v) > 1 else ""}[c.rule]


def _values(r: Stored, metric: str) -> list[float]:
    if metric == "cpu":
        figure = r.cpu_s_per_gib or r.cpu_s_per_gb.get("system")
        return [figure] if figure else []
    return list(r.values or ([r.median] if r.median else []))


def outcome(c: Claim, a: Stored, b: Stored) -> dict:
    """One comparison ``a`` against ``b`` under the claim's rule: its ratio, interval and
    significance, and whether it holds."""
    va, vb = _values(a, c.metric), _values(b, c.metric)
    if not va or not vb:
        return {"ratio": None, "verdict": CANNOT, "why": "a side has no figure for it"}
    cmp = stats.compare(vb, va)                 # a against b: the ratio a / b
    ratio, (lo, hi), sig = cmp.ratio, cmp.ratio_ci95, cmp.significant
    out = {"ratio": ratio, "ci95": [lo, hi], "significant": sig, "n": [len(va), len(vb)]}
    if c.metric == "cpu":
        lo = hi = ratio                         # a series' mean: no interval to read
        sig = abs(ratio - 1) > 0.05 or None
    said = ""
    if c.rule in ("faster", "slower"):
        good = ratio > 1 if c.rule == "faster" else ratio < 1
        verdict = (CANNOT if not sig else HOLDS if good else DOES_NOT)
        if not sig:
            said = ("one sample a side: nothing to test" if sig is None and c.metric != "cpu"
                    else f"no significant difference with {len(va)} and {len(vb)} samples")
    elif c.rule == "same":
        m = c.value[0]
        verdict = (HOLDS if 1 - m <= lo and hi <= 1 + m else
                   DOES_NOT if hi < 1 - m or lo > 1 + m else CANNOT)
        if verdict == CANNOT:
            said = (f"its interval ({lo:.2f}–{hi:.2f}×) is neither wholly within nor wholly "
                    f"outside the ±{m * 100:.0f} % claimed")
    else:
        low, high = ((0.0, c.value[0]) if c.rule == "at_most" else
                     (c.value[0], float("inf")) if c.rule == "at_least" else c.value)
        verdict = (HOLDS if low <= lo and hi <= high else
                   DOES_NOT if hi < low or lo > high else CANNOT)
        if verdict == CANNOT:
            said = (f"its interval ({lo:.2f}–{hi:.2f}×) is neither wholly within nor wholly "
                    f"outside {rule_said(c)}")
    return {**out, "verdict": verdict, "why": said}


def worst(verdicts: list[str]) -> str:
    """A claim of several comparisons: it does not hold where one does not, holds where all
    do, and cannot be said otherwise."""
    if DOES_NOT in verdicts:
        return DOES_NOT
    return HOLDS if verdicts and all(v == HOLDS for v in verdicts) else CANNOT


def _comparisons(c: Claim) -> list[tuple[dict, dict, str]]:
    """Every comparison the claim makes: ``a`` against each side of ``b``, at each value of
    ``each`` (shared dimensions, the other side, and the value said)."""
    values = [dict(zip([k for k, _ in c.each], combo)) for combo in _product(c.each)] or [{}]
    return [({**c.cell, **(c.needs or {}), **v}, side,
             ", ".join(f"{k} {x}" for k, x in v.items())) for side in c.b for v in values]


def _product(each: tuple[tuple[str, tuple], ...]) -> list[tuple]:
    import itertools
    return list(itertools.product(*[v for _, v in each])) if each else []


def judge(c: Claim, label: str, results: list[Stored], guests: list[list[Stored]] = (),
          skipped: list[dict] = ()) -> dict:
    """The claim judged from a run (``results``: this host's) and the guest runs linked to it:
    each comparison from the first of them to hold both its sides (this host's first), never
    one side from each; what it lacks said, with what would settle it."""
    from cryptcost.report.absent import left_out
    pools = [(results, False)] + [(g, True) for g in guests]
    pairs, reasons = [], []
    for shared, side, at_said in _comparisons(c):
        got = next(((found, emulated) for pool, emulated in pools
                    if (found := cells.pair(shared, c.a, side, pool, label, medium=ACROSS))),
                   None)
        what = f"{_said(shared, c.a)} against {_said(shared, side)}"
        if got is None:
            why = _missing(shared, c.a, side, pools, label)
            why += (f" ({cut})" if (cut := left_out(label, cells.candidates(shared, c.a, side),
                                                    list(skipped))) else "")
            pairs.append({"what": what, "at": at_said, "ratio": None, "where": "",
                          "verdict": CANNOT, "why": why})
            reasons.append(why)
            continue
        (a, b), emulated = got
        row = {"what": f"{a.cell.label()} against {b.cell.label()}", "at": at_said,
               "a": a.cell.label(), "b": b.cell.label(),
               "a_value": a.median, "b_value": b.median,
               "where": "the guest (emulated)" if emulated else "this host"}
        row.update(outcome(c, a, b))
        if emulated and c.cost:             # its figures shown, but they judge nothing
            row.update(verdict=CANNOT, why=f"not comparable: {EMULATED}")
        pairs.append(row)
        if row["verdict"] == CANNOT:
            reasons.append(row["why"])
    verdict = worst([p["verdict"] for p in pairs])
    return {"id": c.id, "claim": c.claim, "quote": c.quote, "rule": rule_said(c),
            "cost": c.cost, "verdict": verdict, "pairs": pairs,
            "why": "; ".join(dict.fromkeys(reasons)) if verdict == CANNOT else "",
            "settle": c.settle if verdict == CANNOT else "",
            "where": sorted({p["where"] for p in pairs if p.get("where")})}


# What a claim's two sides must share beyond what it names: the medium and its size, not the
# filesystem (LUKS's ext4 against ZFS's own is what R1 compared).
ACROSS = ("medium", "size")


def _said(shared: dict, side: dict) -> str:
    """A side in a few words, with the conditions it needs (``over peer``)."""
    want = cells.at({**shared, **side}, 0)
    return cells.dims(want) + "".join(f", {k} {v}" for k, v in want.items()
                                      if k in ("link", "delay_ms", "cpus", "streams", R1))


R1 = cells.R1_FILE


def _missing(shared: dict, a: dict, b: dict, pools: list, label: str) -> str:
    """Why no one run holds both sides: a side measured nowhere, or each side in another run
    (this host's and a guest's), which a ratio never mixes."""
    def where(side: dict) -> list[str]:
        return [("the guest (emulated)" if emulated else "this host") for pool, emulated in pools
                if any(cells.find(pool, cand, label) for cand in cells.candidates(shared, side))]
    wa, wb = where(a), where(b)
    if wa and wb:
        return (f"not comparable: one side measured only on {' and '.join(dict.fromkeys(wa))}, "
                f"the other only on {' and '.join(dict.fromkeys(wb))}: a ratio never mixes "
                "this host's cells with a guest's")
    gone = [_said(shared, s) for s, w in ((a, wa), (b, wb)) if not w]
    return "not measured: no result for " + " nor ".join(gone)
