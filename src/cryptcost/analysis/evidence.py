"""The bottleneck from evidence: a verdict of :mod:`cryptcost.analysis.bottleneck` (from
the ceilings) held against the cell's CPU profile (:mod:`cryptcost.analysis.profile`'s layers).

The cipher at half of the busy CPU or more makes the verdict ``cipher``; where no ceiling bound
(``latency``, ``unknown``), a CPU mostly idle keeps ``latency`` (waiting), the largest layer names
the verdict, or, none large enough, ``spread``; each says what a faster cipher could win at most.
The ceilings' verdict stays in the sentence where the two disagree.
"""

from __future__ import annotations

from dataclasses import replace

from cryptcost.analysis import profile
from cryptcost.analysis.profile import Layers
from cryptcost.analysis.bottleneck import Verdict


# The largest layer of the busy CPU binds where no ceiling does, if it is at least this share
# (the low end of its 95 % interval) and the CPU, not a wait, set the speed: at least ONE_CORE
# cores' worth of it busy
LAYER_BOUND = 0.3
ONE_CORE = 0.8
# what each layer is called as a bottleneck, and what it is
BOUND_BY = {"fuse": ("fuse", "the round trips between the kernel and the FUSE daemon"),
            "copy": ("copy", "copying the data, between user and kernel space or in memory"),
            "page cache": ("filesystem", "the filesystem and its page cache"),
            "block": ("block", "the block layer (loop, device-mapper, their workqueues)"),
            "network": ("network stack", "the kernel's network stack"),
            "syscall, TUN": ("per-packet", "the per-packet path: system calls, the TUN device, "
                                           "switches between threads"),
            "memory": ("memory", "the kernel's memory management (page allocation, faults, "
                                 "slab)"),
            "stack (user)": ("stack code", "the stack's own code, outside its cipher"),
            "measuring tool": ("measuring tool", "the measuring tool itself (fio): the figure "
                                                 "is the tool's as much as the stack's")}
# verdicts that only say no ceiling bound (``software-aes``: the host names a likely cause): the
# profile may name what did (or that the CPU's work is spread over several layers: ``spread``)
UNEXPLAINED = ("latency", "unknown", "software-aes")


def with_profile(v: Verdict, spent: Layers | None, label: str, cores: int = 1) -> Verdict:
    """A verdict held against the cell's CPU profile (``analysis.profile``): where the
    cipher takes at least half of the busy CPU — the lower end of its 95 % interval, for the
    profile's samples — it binds, whatever the ceilings inferred (a device or link ceiling
    stays: the stack already runs at its baseline's speed). Where no ceiling bound
    (``latency``, ``unknown``), the largest layer binds if the CPU set the speed (at least
    :data:`ONE_CORE` of the ``cores`` busy) and it holds :data:`LAYER_BOUND` of the busy CPU;
    a CPU mostly idle says that waiting set it. Otherwise the profile is said next to the
    verdict, as its evidence (and, near the line, that its samples cannot tell). The ceilings'
    verdict stays in the sentence where the two disagree."""
    if not spent:
        return v
    return replace(_held(v, spent, label, cores), profile=spent)


def _held(v: Verdict, spent: Layers, label: str, cores: int) -> Verdict:
    share = spent.of_busy.get("cipher", 0.0)
    low = profile.cipher_low(spent)
    ceilings = dict(v.ceilings)
    sure = share if low is None else low
    said = profile.sentence(spent)
    if share >= profile.CIPHER_BOUND > sure and v.bottleneck not in ("device", "link", "cipher"):
        n = round((spent.samples or 0) * spent.busy)
        return Verdict(v.bottleneck, f"{v.sentence}; {said}; the cipher's "
                       f"{share:.0%} of {n} busy samples could be as low as {low:.0%}: too few "
                       "to call it cipher-bound", ceilings)
    if sure >= profile.CIPHER_BOUND and v.bottleneck not in ("device", "link", "cipher"):
        ran = ", ".join(spent.cipher_symbols) or "its crypto code"
        return Verdict("cipher",
                       f"{label}: {share:.0%} of the busy CPU ran the cipher ({ran}), by its CPU "
                       f"profile: cipher-bound (the ceilings alone said {v.bottleneck})",
                       {**ceilings, "rule": f"profile: the cipher ≥ {profile.CIPHER_BOUND:.0%} "
                                            "of the busy CPU"})
    if v.bottleneck in UNEXPLAINED:
        return _by_layer(v, spent, label, cores, ceilings)
    return Verdict(v.bottleneck, f"{v.sentence}; {said}", ceilings)


def amdahl(spent: Layers, worth: float) -> str:
    """What a faster cipher could win, where the CPU sets the speed (R3's question: why a 6×
    faster cipher made a volume only 1.6–1.8× faster). The cipher took ``c`` of the busy CPU,
    and ``worth`` cores were busy on average: c × worth CPU-seconds per second of the run. A
    free cipher shortens the run by at most that (work on other cores may overlap it), so the
    run gets at most 1 / (1 − c × worth) times faster; nothing is said where that bound is none."""
    c = spent.of_busy.get("cipher", 0.0)
    spent = c * worth
    if c < 0.02 or spent >= 0.95:
        return ""
    return (f"; the cipher is {c:.0%} of the busy CPU ({spent:.2f} of a core's time), so even "
            f"a free cipher would make it at most {1 / (1 - spent):.2f}× faster")


def _by_layer(v: Verdict, spent: Layers, label: str, cores: int, ceilings: dict) -> Verdict:
    """A verdict no ceiling could give, from the profile's largest layer (see with_profile)."""
    said = profile.sentence(spent)
    worth = spent.busy * max(1, cores)
    top = profile.largest(spent)
    if worth < ONE_CORE:
        return Verdict("latency",
                       f"{v.sentence}; the CPU was busy only {worth:.1f} of {cores} cores' worth "
                       f"in the profiled run, so waiting, not computing, set the speed; {said}",
                       {**ceilings, "rule": f"{v.ceilings.get('rule')}; profile: under "
                                            f"{ONE_CORE:g} of a core busy"})
    unnamed = top is not None and top[0] not in BOUND_BY and top[0] != "cipher"
    if top is None or unnamed and top[1] >= 0.5:
        what = f"'{top[0]}'" if top else "nothing"
        return Verdict(v.bottleneck, f"{v.sentence}; {said}; its largest part, {what}, is code "
                       "no layer names", ceilings)
    name, share = top
    low = profile.share_low(spent, name)
    # code no layer names, under half of the busy CPU: the work is spread, that code among it
    sure = 0.0 if unnamed else share if low is None else low
    kind, what = BOUND_BY.get(name, ("cipher", "the cipher"))
    ran = ", ".join(spent.symbols.get(name, ())) or name
    if sure < LAYER_BOUND:
        return Verdict("spread",
                       f"{label}: with {worth:.1f} of {cores} cores' worth busy, the CPU's work is "
                       f"spread over several layers, none holding {LAYER_BOUND:.0%} of it for sure "
                       f"(the largest, {name}, {share:.0%}"
                       + (f", could be {low:.0%}" if low is not None else "")
                       + f"), by its CPU profile{amdahl(spent, worth)}; the ceilings alone said "
                       f"{v.bottleneck} ({v.ceilings.get('rule')}); {said}",
                       {**ceilings, "rule": f"profile: no layer ≥ {LAYER_BOUND:.0%} of the busy "
                                            f"CPU, at least {ONE_CORE:g} of a core busy"})
    # most of the busy CPU: that layer binds; less than half: it is the largest part, no more
    called = f"{kind}-bound" if sure >= 0.5 else f"{kind} is its largest part"
    return Verdict(kind,
                   f"{label}: {share:.0%} of the busy CPU ran {what} ({ran}), with "
                   f"{worth:.1f} of {cores} cores' worth busy, by its CPU profile: {called}"
                   f"{amdahl(spent, worth) if kind != 'cipher' else ''}; "
                   f"the ceilings alone said {v.bottleneck} ({v.ceilings.get('rule')}); {said}",
                   {**ceilings, "rule": f"profile: the largest layer ≥ {LAYER_BOUND:.0%} of the "
                                        f"busy CPU, at least {ONE_CORE:g} of a core busy"})
