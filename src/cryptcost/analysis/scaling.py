"""R3's question for every stack: what hardware AES is worth to it, and how
it scales with cores.

A stack's results on one cell (workload, op, block size, …), measured with
acceleration on and off (``--accel on,off``) and on several CPU counts
(``--cpus 1,2``), form its *curve*: throughput by (acceleration, CPUs). From
each curve:

* what acceleration is worth, per CPU count: only from an acceleration-off copy whose slowdown
  was verified (rule 14); an unverified or ineffective switch is said, never
  turned into a number;
* why there is no acceleration-off figure where there is none: the library
  has no switch, or the kernel's crypto (with the driver it used here: a
  software AES gets nothing from AES-NI, whatever the CPU has);
* the scaling from the fewest to the most CPUs, with and without acceleration;
* where the cipher stops being the bottleneck: the verdicts along the curve.

A pure function of stored results and their verdicts, like the rest of the
analysis.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from cryptcost.analysis.bottleneck import Verdict, kernel_aes_is_software
from cryptcost.record import Host, Skipped, Stored
from cryptcost.units import rate

OFF = "/accel-off"


@dataclass(frozen=True)
class Point:
    """One result along a curve: its CPUs, acceleration, speed and verdict."""

    cpus: int | None
    accel: bool
    bytes_per_s: float
    ci95: list[float] | None
    bottleneck: str | None
    cipher_ceiling: float | None
    verified: bool | None
    speedup: float | None


@dataclass(frozen=True)
class Accel:
    """What is known of hardware acceleration for a curve: its ``state`` and
    the sentence that says it; ``worth`` (CPUs → speed-up) once verified, the
    kernel's ``driver`` (and whether it is ``software``) for a kernel stack."""

    state: str
    text: str
    worth: dict[int, float] | None = None
    driver: str | None = None
    software: bool | None = None

    def to_dict(self) -> dict:
        d = {"state": self.state, "text": self.text}
        if self.state == "verified":
            d["worth"] = self.worth
        if self.state == "kernel":
            d.update(driver=self.driver, software=self.software)
        return d


@dataclass(frozen=True)
class Scale:
    """Throughput on the most CPUs (``last``) over that on the fewest (``first``)."""

    first: int
    last: int
    ratio: float

    def to_dict(self) -> dict:
        return {"from": self.first, "to": self.last, "ratio": self.ratio}


@dataclass(frozen=True)
class Knee:
    """Where the cipher binds along the CPU counts: up to ``until`` CPUs, and
    no longer from ``stops_at`` (None: not found among the counts measured)."""

    until: int | None
    stops_at: int | None
    text: str


@dataclass(frozen=True)
class Curve:
    """A stack's results on one cell, by acceleration and CPU count."""

    stack: str
    kind: str
    cell: str
    workload: str | None
    op: str | None
    block_bytes: int | None
    points: list[Point]
    accel: Accel
    scaling: dict[str, Scale]          # "on" / "off" → the scaling with acceleration on / off
    cipher_bound: Knee | None
    cipher_bound_off: Knee | None

    def to_dict(self) -> dict:
        return {"stack": self.stack, "kind": self.kind, "cell": self.cell,
                "workload": self.workload, "op": self.op, "block_bytes": self.block_bytes,
                "points": [asdict(p) for p in self.points], "accel": self.accel.to_dict(),
                "scaling": {k: v.to_dict() for k, v in self.scaling.items()},
                "cipher_bound": asdict(self.cipher_bound) if self.cipher_bound else {},
                "cipher_bound_off": asdict(self.cipher_bound_off) if self.cipher_bound_off
                else {}}


def _name(stack: str) -> str:
    return stack.removesuffix(OFF)


def _cpus(n: int | None) -> str:
    return "all CPUs" if not n else f"{n} CPU{'s' if n > 1 else ''}"


def curves(results: list[Stored], verdicts: dict[int, Verdict], host: Host,
           skipped: list[Skipped] | None = None) -> list[Curve]:
    """One curve per measured stack and cell that has something to say: two
    or more points (acceleration off, CPU counts), or a reason why
    acceleration could not be switched off."""
    groups: dict[tuple, list[tuple[int, Stored]]] = {}
    for i, r in enumerate(results):
        if r.kind in ("storage", "network") and not r.facts.is_baseline and r.bytes_per_s:
            groups.setdefault(r.paired(stack=_name(r.stack), cpus=None), []).append((i, r))
    no_switch = {_name(s.stack): s.reason for s in skipped or []
                 if s.accel == "cannot be switched off"}
    # a stack measured on the same cell in several parts (the seeds suite's R2 and R3 both read
    # 1 MiB sequentially): each curve says its part, lest two rows read alike
    titles: dict[tuple, set] = {}
    for key in groups:
        titles.setdefault((key.stack, key.title()), set()).add(key.part)
    out = []
    for key, members in groups.items():
        points = sorted((Point(r.cell.cpus, r.cell.accel is not False, r.bytes_per_s,
                               list(r.ci95) if r.ci95 else None,
                               v.bottleneck if (v := verdicts.get(i)) else None,
                               v.ceilings.get("cipher") if v else None,
                               r.accel_verified, r.accel_speedup)
                         for i, r in members), key=lambda p: (not p.accel, p.cpus or 0))
        first = members[0][1]
        title = key.title()
        if len(titles[(key.stack, title)]) > 1 and key.part:
            title += f" [{key.part.split(',')[0]}]"
        curve = Curve(key.stack, key.kind, title, key.workload, key.op, key.block_bytes,
                      points, _accel(first, points, no_switch.get(key.stack), host),
                      _scaling(points), _knee(points), _knee(points, accel=False))
        if len(points) > 1 or curve.accel.state in ("cannot be switched off", "kernel"):
            out.append(curve)
    return sorted(out, key=lambda c: (c.stack, c.cell))


def _accel(r: Stored, points: list[Point], no_switch: str | None, host: Host) -> Accel:
    """What is known of hardware acceleration for this curve's stack."""
    off = [p for p in points if not p.accel]
    if off:
        verified = [p for p in off if p.verified and p.speedup]
        if verified:
            return Accel("verified", ", ".join(f"{p.speedup:.1f}× on {_cpus(p.cpus)}"
                                               for p in verified),
                         worth={p.cpus or 0: p.speedup for p in verified})
        if any(p.verified is False for p in off):
            return Accel("not effective",
                         "switching acceleration off did not make it slower: the switch does "
                         "not reach this stack's crypto (or it does not use AES-NI)")
        slower = [p for p in off if p.speedup and p.speedup > 1]
        if slower:
            return Accel("unverified", "acceleration off is unverified: slower by the medians ("
                         + ", ".join(f"{p.speedup:.1f}× on {_cpus(p.cpus)}" for p in slower)
                         + "), but not significantly with the samples taken")
        return Accel("unverified",
                     "acceleration off is unverified: no comparable result with it on")
    if r.facts.crypto_library == "kernel":
        soft, driver = kernel_aes_is_software(host, r)
        if soft and r.cipher_ref and r.cipher_ref.algorithm.startswith("aes"):
            text = (f"it gets nothing from AES-NI on this kernel: its AES driver is {driver}, a "
                    "software driver (a kernel with aesni_intel loaded would use the CPU's AES "
                    "instructions)")
        else:
            text = (f"its kernel driver here is {driver or 'not recorded'}; acceleration cannot be "
                    "switched off from userspace: measure it without in a guest booted with the "
                    f"driver blacklisted (cryptcost vm --blacklist aesni_intel -- {r.kind} "
                    f"--stacks {_name(r.stack)})")
        return Accel("kernel", text, driver=driver, software=soft)
    if no_switch is not None:
        return Accel("cannot be switched off", no_switch)
    return Accel("not measured", "acceleration off was not asked for (--accel on,off)")


def _scaling(points: list[Point]) -> dict[str, Scale]:
    """Throughput on the most CPUs over throughput on the fewest, with and without acceleration."""
    out = {}
    for accel in (True, False):
        pts = sorted((p for p in points if p.accel == accel and p.cpus), key=lambda p: p.cpus)
        if len(pts) >= 2:
            out["on" if accel else "off"] = Scale(pts[0].cpus, pts[-1].cpus,
                                                  pts[-1].bytes_per_s / pts[0].bytes_per_s)
    return out


def _knee(points: list[Point], accel: bool = True) -> Knee | None:
    """Where along the CPU counts (acceleration on, or off) the cipher is the
    bottleneck, and the count from which it no longer is."""
    pts = sorted((p for p in points if p.accel == accel and p.cpus and p.bottleneck),
                 key=lambda p: p.cpus)
    if not pts:
        return None
    if not any(p.cipher_ceiling for p in pts):
        return Knee(None, None, "no cipher ceiling in this run (its cipher table lacks "
                                "the stack's cipher: cryptcost run measures both)")
    bound = [p.cpus for p in pts if p.bottleneck == "cipher"]
    if not bound:
        return Knee(None, None, "not cipher-bound on any CPU count measured (the bottleneck: "
                                f"{pts[-1].bottleneck})")
    since = (f"from {_cpus(bound[0])} (on fewer: {pts[0].bottleneck})"
             if bound[0] > pts[0].cpus else f"on {_cpus(bound[0])}")
    after = [p for p in pts if p.cpus > bound[0] and p.bottleneck != "cipher"]
    if not after:
        upto = ("" if bound[0] == pts[-1].cpus and bound[0] > pts[0].cpus
                else f" up to {_cpus(pts[-1].cpus)}")
        return Knee(pts[-1].cpus, None,
                    f"cipher-bound {since}{upto}, the most measured: more cores would still help")
    return Knee(max(c for c in bound if c < after[0].cpus), after[0].cpus,
                f"cipher-bound {since}; from {_cpus(after[0].cpus)} the bottleneck is "
                f"{after[0].bottleneck}, not the cipher")


def _bound_text(c: Curve, told_only: bool = False) -> str:
    """Where the cipher binds, with acceleration on; and off where that says
    more. ``told_only``: only where the cipher binds somewhere (for findings)."""
    on, off = c.cipher_bound, c.cipher_bound_off
    parts = [on.text if on else "—"] if (on and on.until) or not told_only else []
    if off and off.until:
        parts.append(f"without acceleration: {off.text}")
    return "; ".join(parts)


def findings(cs: list[Curve]) -> list[str]:
    """R3's answers in sentences, per stack: what acceleration is worth (or why
    there is no figure), and what more CPUs give, with where the cipher binds."""
    out, said = [], set()
    by_stack: dict[str, list[Curve]] = {}
    for c in cs:
        by_stack.setdefault(c.stack, []).append(c)
    for stack, mine in by_stack.items():
        worth = [c for c in mine if c.accel.state == "verified"]
        if worth:
            out.append(f"{stack}: hardware acceleration is worth " + "; ".join(
                f"{c.accel.text} ({c.cell})" for c in worth) + " here")
            # where the same switch is worth something, it reaches the stack's cipher: a cell it
            # did not slow is one the cipher does not limit (dm-crypt's small requests in a guest)
            same = [c.cell for c in mine if c.accel.state == "not effective"]
            if same:
                said.add((stack, "not effective"))
                out.append(f"{stack}: acceleration off was not significantly slower at "
                           + ", ".join(same) + ": the switch reaches its cipher (above), so "
                           "the cipher does not limit these cells, as far as their samples tell")
        for c in mine:
            state = c.accel.state
            if state in ("not effective", "unverified", "cannot be switched off", "kernel") and \
                    (stack, state) not in said:
                said.add((stack, state))
                repeat = state == "cannot be switched off" and state not in c.accel.text
                prefix = "acceleration cannot be switched off: " if repeat else ""
                out.append(f"{stack}: {prefix}{c.accel.text}")
        scaled = [c for c in mine if c.scaling]
        if scaled:
            sc = scaled[0].scaling["on" if "on" in scaled[0].scaling else "off"]
            parts = []
            for c in scaled:
                on, off = c.scaling.get("on"), c.scaling.get("off")
                part = f"{c.cell} {on.ratio:.2f}×" if on else f"{c.cell}"
                part += f" ({off.ratio:.2f}× without acceleration)" if off else ""
                told = _bound_text(c, told_only=True)
                part += f": {told}" if told else ""
                parts.append(part)
            out.append(f"{stack} from {_cpus(sc.first)} to {_cpus(sc.last)}: "
                       + "; ".join(parts))
    return out


def rows(cs: list[Curve]) -> list[dict]:
    """The curves formatted for people: one row per curve."""
    def pts(accel: bool, c: Curve) -> str:
        return "; ".join(f"{_cpus(p.cpus)} {rate(p.bytes_per_s)}"
                         + (f" ({p.bottleneck})" if p.bottleneck else "")
                         for p in c.points if p.accel == accel) or "—"

    def off(c: Curve) -> str:
        if c.accel.state == "cannot be switched off":
            return "cannot be switched off"
        if c.accel.state == "kernel":
            return f"cannot be switched off from userspace (kernel driver {c.accel.driver or '?'})"
        return pts(False, c)
    return [{"stack": c.stack, "cell": c.cell, "on": pts(True, c), "off": off(c),
             "worth": c.accel.text if c.accel.state == "verified" else c.accel.state,
             "scaling": ", ".join(f"{v.ratio:.2f}×" + ("" if k == "on" else " (off)")
                                  for k, v in c.scaling.items()) or "—",
             "cipher_bound": _bound_text(c)} for c in cs]
