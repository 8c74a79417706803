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

from cryptcost.analysis.bottleneck import kernel_aes_is_software
from cryptcost.record import Stored
from cryptcost.units import rate

OFF = "/accel-off"


def _name(stack: str) -> str:
    return stack.removesuffix(OFF)


def _cpus(n: int | None) -> str:
    return "all CPUs" if not n else f"{n} CPU{'s' if n > 1 else ''}"


def curves(results: list[Stored], verdicts: dict[int, dict], host: dict,
           skipped: list[dict] | None = None) -> list[dict]:
    """One curve per measured stack and cell that has something to say: two
    or more points (acceleration off, CPU counts), or a reason why
    acceleration could not be switched off."""
    groups: dict[tuple, list[tuple[int, Stored]]] = {}
    for i, r in enumerate(results):
        if r.kind in ("storage", "network") and not r.facts.is_baseline and r.bytes_per_s:
            groups.setdefault(r.paired(stack=_name(r.stack), cpus=None), []).append((i, r))
    no_switch = {_name(s["stack"]): s.get("reason", "") for s in skipped or []
                 if s.get("accel") == "cannot be switched off"}
    out = []
    for key, members in groups.items():
        points = sorted(({"cpus": r.cell.cpus, "accel": r.cell.accel is not False,
                          "bytes_per_s": r.bytes_per_s, "ci95": list(r.ci95) if r.ci95 else None,
                          "bottleneck": (verdicts.get(i) or {}).get("bottleneck"),
                          "cipher_ceiling": ((verdicts.get(i) or {}).get("ceilings")
                                             or {}).get("cipher"),
                          "verified": r.accel_verified, "speedup": r.accel_speedup}
                         for i, r in members), key=lambda p: (not p["accel"], p["cpus"] or 0))
        first = members[0][1]
        curve = {"stack": key.stack, "kind": key.kind, "cell": key.title(),
                 "workload": key.workload,
                 "op": key.op, "block_bytes": key.block_bytes, "points": points,
                 "accel": _accel(first, points, no_switch.get(key.stack), host),
                 "scaling": _scaling(points), "cipher_bound": _knee(points),
                 "cipher_bound_off": _knee(points, accel=False)}
        if len(points) > 1 or curve["accel"]["state"] in ("cannot be switched off", "kernel"):
            out.append(curve)
    return sorted(out, key=lambda c: (c["stack"], c["cell"]))


def _accel(r: Stored, points: list[dict], no_switch: str | None, host: dict) -> dict:
    """What is known of hardware acceleration for this curve's stack."""
    off = [p for p in points if not p["accel"]]
    if off:
        verified = [p for p in off if p["verified"] and p["speedup"]]
        if verified:
            return {"state": "verified", "worth": {p["cpus"] or 0: p["speedup"] for p in verified},
                    "text": ", ".join(f"{p['speedup']:.1f}× on {_cpus(p['cpus'])}"
                                      for p in verified)}
        if any(p["verified"] is False for p in off):
            return {"state": "not effective",
                    "text": "switching acceleration off did not make it slower: the "
                    "switch does not reach this stack's crypto (or it does not use AES-NI)"}
        return {"state": "unverified",
                "text": "acceleration off is unverified: no comparable result with it on"}
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
        return {"state": "kernel", "driver": driver, "software": soft, "text": text}
    if no_switch is not None:
        return {"state": "cannot be switched off", "text": no_switch}
    return {"state": "not measured", "text": "acceleration off was not asked for (--accel on,off)"}


def _scaling(points: list[dict]) -> dict:
    """Throughput on the most CPUs over throughput on the fewest, with and without acceleration."""
    out = {}
    for accel in (True, False):
        pts = sorted((p for p in points if p["accel"] == accel and p["cpus"]),
                     key=lambda p: p["cpus"])
        if len(pts) >= 2:
            out["on" if accel else "off"] = {
                "from": pts[0]["cpus"], "to": pts[-1]["cpus"],
                "ratio": pts[-1]["bytes_per_s"] / pts[0]["bytes_per_s"]}
    return out


def _knee(points: list[dict], accel: bool = True) -> dict:
    """Where along the CPU counts (acceleration on, or off) the cipher is the
    bottleneck, and the count from which it no longer is."""
    pts = sorted((p for p in points if p["accel"] == accel and p["cpus"] and p["bottleneck"]),
                 key=lambda p: p["cpus"])
    if not pts:
        return {}
    if not any(p.get("cipher_ceiling") for p in pts):
        return {"until": None, "stops_at": None,
                "text": "no cipher ceiling in this run (its cipher table lacks "
                "the stack's cipher: cryptcost run measures both)"}
    bound = [p["cpus"] for p in pts if p["bottleneck"] == "cipher"]
    if not bound:
        text = ("not cipher-bound on any CPU count measured (the bottleneck: "
                f"{pts[-1]['bottleneck']})")
        return {"until": None, "stops_at": None, "text": text}
    since = (f"from {_cpus(bound[0])} (on fewer: {pts[0]['bottleneck']})"
             if bound[0] > pts[0]["cpus"] else f"on {_cpus(bound[0])}")
    after = [p for p in pts if p["cpus"] > bound[0] and p["bottleneck"] != "cipher"]
    if not after:
        upto = ("" if bound[0] == pts[-1]["cpus"] and bound[0] > pts[0]["cpus"]
                else f" up to {_cpus(pts[-1]['cpus'])}")
        text = f"cipher-bound {since}{upto}, the most measured: more cores would still help"
        return {"until": pts[-1]["cpus"], "stops_at": None, "text": text}
    text = (f"cipher-bound {since}; from {_cpus(after[0]['cpus'])} the bottleneck is "
            f"{after[0]['bottleneck']}, not the cipher")
    return {"until": max(c for c in bound if c < after[0]["cpus"]), "stops_at": after[0]["cpus"],
            "text": text}


def _bound_text(c: dict, told_only: bool = False) -> str:
    """Where the cipher binds, with acceleration on; and off where that says
    more. ``told_only``: only where the cipher binds somewhere (for findings)."""
    on, off = c["cipher_bound"], c.get("cipher_bound_off") or {}
    parts = [on.get("text", "—")] if on.get("until") or not told_only else []
    if off.get("until"):
        parts.append(f"without acceleration: {off['text']}")
    return "; ".join(parts)


def findings(cs: list[dict]) -> list[str]:
    """R3's answers in sentences, per stack: what acceleration is worth (or why
    there is no figure), and what more CPUs give, with where the cipher binds."""
    out, said = [], set()
    by_stack: dict[str, list[dict]] = {}
    for c in cs:
        by_stack.setdefault(c["stack"], []).append(c)
    for stack, mine in by_stack.items():
        worth = [c for c in mine if c["accel"]["state"] == "verified"]
        if worth:
            out.append(f"{stack}: hardware acceleration is worth " + "; ".join(
                f"{c['accel']['text']} ({c['cell']})" for c in worth) + " here")
        for c in mine:
            state = c["accel"]["state"]
            if state in ("not effective", "unverified", "cannot be switched off", "kernel") and \
                    (stack, state) not in said:
                said.add((stack, state))
                repeat = state == "cannot be switched off" and state not in c["accel"]["text"]
                prefix = "acceleration cannot be switched off: " if repeat else ""
                out.append(f"{stack}: {prefix}{c['accel']['text']}")
        scaled = [c for c in mine if c["scaling"]]
        if scaled:
            sc = scaled[0]["scaling"]["on" if "on" in scaled[0]["scaling"] else "off"]
            parts = []
            for c in scaled:
                on, off = c["scaling"].get("on"), c["scaling"].get("off")
                part = f"{c['cell']} {on['ratio']:.2f}×" if on else f"{c['cell']}"
                part += f" ({off['ratio']:.2f}× without acceleration)" if off else ""
                told = _bound_text(c, told_only=True)
                part += f": {told}" if told else ""
                parts.append(part)
            out.append(f"{stack} from {_cpus(sc['from'])} to {_cpus(sc['to'])}: "
                       + "; ".join(parts))
    return out


def rows(cs: list[dict]) -> list[dict]:
    """The curves formatted for people: one row per curve."""
    def pts(accel: bool, c: dict) -> str:
        return "; ".join(f"{_cpus(p['cpus'])} {rate(p['bytes_per_s'])}"
                         + (f" ({p['bottleneck']})" if p["bottleneck"] else "")
                         for p in c["points"] if p["accel"] == accel) or "—"
    return [{"stack": c["stack"], "cell": c["cell"], "on": pts(True, c),
             "off": pts(False, c) if c["accel"]["state"] not in ("cannot be switched off", "kernel")
             else ("cannot be switched off" if c["accel"]["state"] == "cannot be switched off"
                   else "cannot be switched off from userspace (kernel driver "
                        f"{c['accel']['driver'] or '?'})"),
             "worth": c["accel"]["text"] if c["accel"]["state"] == "verified"
             else c["accel"]["state"],
             "scaling": ", ".join(f"{v['ratio']:.2f}×" + ("" if k == "on" else " (off)")
                                  for k, v in c["scaling"].items()) or "—",
             "cipher_bound": _bound_text(c)} for c in cs]
