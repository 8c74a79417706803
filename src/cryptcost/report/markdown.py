"""The Markdown report: a pure function of the report document."""

from __future__ import annotations

from cryptcost.report.records import Document


def _table(headers: list[str], rows: list[list]) -> list[str]:
    def cell(v) -> str:
        return str(v if v is not None else "").replace("|", "\\|").replace("\n", " ")
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out


def render(doc: Document) -> str:
    h = doc.host
    lines = [f"# {doc.title}", "",
             f"{doc.run.command} ({doc.run.suite or 'custom'}), "
             f"{doc.run.status}, started {doc.run.started} on {h.hostname}: "
             f"{h.cpu}, {h.cores} cores, kernel {h.kernel}.", ""]
    if doc.emulated:
        lines += [f"> **{doc.emulated}**", ""]
    lines += _answer(doc.answer)
    lines += ["CONTENTS", ""]
    lines += ["## Recommendation", ""]
    for rec in doc.recommendations:
        lines += [f"**{rec.title}.** {rec.text}", ""]
    if doc.ranking:
        lines += ["## Ranking (1 MiB sequential, relative to plain)", ""]
        lines += _table(["rank", "stack", "throughput relative to plain"],
                        [[r.rank, r.stack, r.relative] for r in doc.ranking])
        lines += ["", "A rank shared (=) means no significant difference on 1 MiB reads or writes."]
        lines.append("")
    if doc.split:
        lines += ["## Cost split: reference → twin → stack", "", doc.split_intro, ""]
        lines += _table(["stack", "op", "block", "reference → twin → stack", "total",
                         "the twin adds", "share",
                         "own", "note"],
                        [[x.stack, x.op, x.block, x.chain, x.total, x.isolates,
                          x.shared,
                          x.own, x.note] for x in doc.split])
        lines.append("")
    if doc.findings:
        lines += ["## Findings", ""] + [f"- {f}" for f in doc.findings] + [""]
    if doc.tuning:
        lines += ["## Tuning measured on this host", ""] + [f"- {t}" for t in doc.tuning] + [""]
    if doc.predictions:
        lines += [f"## Cost model: {doc.target}", ""]
        lines += _table(["stack", "workload", "op", "block", "measured here", "predicted", "binds"],
                        [[p["stack"], p["workload"], p["op"], p["block_bytes"],
                          f"{p['measured'] / 1e6:.1f} MB/s",
                          f"{p['predicted_low'] / 1e6:.1f}–{p['predicted_high'] / 1e6:.1f} MB/s",
                          p["binding"]]
                         for p in doc.predictions])
        lines.append("")
    if doc.scaling_rows:
        lines += ["## Hardware AES and cores, per stack", ""]
        lines += _table(["stack", "cell", "acceleration on", "acceleration off",
                         "hardware AES is worth",
                         "fewest → most CPUs", "where the cipher binds"],
                        [[x["stack"], x["cell"], x["on"], x["off"], x["worth"], x["scaling"],
                          x["cipher_bound"]]
                         for x in doc.scaling_rows])
        lines.append("")
    lines += _field_reports(doc)
    if doc.storage:
        lines += ["## Storage stacks", ""]
        lines += _table(["stack", "workload", "op", "block", "QD", "median", "95 % CI", "n", "IOPS",
                         "CPU-s/GiB",
                         "cycles/B", "vs baseline", "cache", "bottleneck"],
                        [[r.stack + (f" ({r.cpus} CPU)" if r.cpus else ""), r.workload,
                          r.op,
                          r.block, r.qd, r.median, r.ci, r.n, r.iops,
                          r.cpu_s_per_gib,
                          r.cycles_per_byte, r.vs, r.cache,
                          r.bottleneck] for r in doc.storage])
        lines += ["", "### Bottlenecks", ""]
        lines += [f"- {r.explanation}" for r in doc.storage if r.explanation]
        lines.append("")
    if doc.network:
        lines += ["## Network stacks", "",
                  "Both ends of the link ran on this host's CPUs: compare CPU-s/GB per end, "
                  "not Gbit/s.", ""]
        lines += _table(["stack", "workload", "link", "median", "95 % CI", "n", "CPU-s/GB a",
                         "CPU-s/GB b",
                         "CPU-s/GB all", "retransmits", "packet", "wire", "negotiated",
                         "vs baseline", "bottleneck"],
                        [[r.stack, r.workload + (f" ×{r.streams}" if r.streams > 1
                                                       else ""), r.link,
                          f"{r.median} ({r.gbit})", r.ci, r.n, r.cpu_a, r.cpu_b,
                          r.cpu_system,
                          r.retransmits, r.packet, r.wire, r.negotiated, r.vs,
                          r.bottleneck]
                         for r in doc.network])
        lines += ["", "### Bottlenecks", ""]
        lines += [f"- {r.explanation}" for r in doc.network if r.explanation]
        lines.append("")
    if doc.ciphers:
        lines += ["## Raw ciphers", ""]
        lines += _table(["engine", "algorithm", "buffer", "threads", "acceleration", "median",
                         "95 % CI", "n", "warning"],
                        [[c.engine, c.algorithm, c.buffer, c.threads, c.accel,
                          c.median, c.ci,
                          c.n, c.warning] for c in doc.ciphers])
        lines.append("")
    if doc.unstable:
        lines += ["## Unstable results", "", doc.unstable_intro,
                  ""] + [f"- {g.text}" for g in doc.unstable]
        lines.append("")
    if doc.not_measured:
        lines += ["## Not measured", ""]
        lines += _table(["what", "why", "install"],
                        [[m.what, m.why, m.install] for m in doc.not_measured])
        lines.append("")
    lines += ["## Environment", ""]
    lines += _table(["", ""], [["CPU",
                                f"{h.cpu} ({h.cores} cores, {h.mhz} MHz, governor "
                                f"{h.governor})"],
                               ["CPU flags", h.flags], ["memory", f"{h.memory_gib} GiB"],
                               ["kernel", h.kernel]]
                    + [list(e) for e in doc.environment])
    if doc.notes:
        lines += [""] + [f"- {n}" for n in doc.notes]
    return "\n".join(_contents(lines)) + "\n"


def _answer(a) -> list[str]:
    """The answer first: the table per use, the picks and why, what to change, and how a
    predicted figure was checked."""
    from cryptcost.report import answer as said
    heads, rows = said.grid(a, rest=True)
    lines = ["## The answer", ""] + _table(heads, rows) + ["", said.legend(a), ""]
    lines += [f"- ★ {said.pick(u)}" for u in a.uses] + [""]
    if a.changes:
        lines += ["**What to change**, largest win first:", ""]
        lines += [said.change(n, c) for n, c in enumerate(a.changes, 1)] + [""]
    lines += [f"- {n}" for n in a.notes] + ([""] if a.notes else [])
    lines += [f"How a predicted figure was checked: {a.checked}.", ""]
    return lines


def anchor(title: str) -> str:
    """The anchor a Markdown viewer gives a heading (GitHub's: lower case, spaces to dashes,
    punctuation gone)."""
    import re
    return re.sub(r"[^\w\- ]", "", title.lower()).strip().replace(" ", "-")


def _contents(lines: list[str]) -> list[str]:
    """The report with its table of contents where ``CONTENTS`` stands: every section (##),
    and the field reports' own blocks (###) beneath theirs."""
    heads, under = [], False
    for line in lines:
        if line.startswith("## "):
            under = line == "## Field reports"
            heads.append(f"- [{line[3:]}](#{anchor(line[3:])})")
        elif line.startswith("### ") and under:
            heads.append(f"  - [{line[4:]}](#{anchor(line[4:])})")
    at = lines.index("CONTENTS")
    return lines[:at] + ["Contents:", ""] + heads + lines[at + 1:]


def _field_reports(doc: Document) -> list[str]:
    """The field reports: the claims grid first, then each report's block — its claims judged,
    its figures beside this run's, its own tables."""
    if not doc.field_reports:
        return []
    lines = ["## Field reports", "", doc.field_reports_intro, ""]
    lines += ["Every claim they draw, judged here:", ""]
    lines += _table(["report", "claim", "verdict", "judged from"],
                    [[g["report"], g["claim"], g["verdict"], g["where"]]
                     for g in doc.field_reports_grid]) + [""]
    lines += [b["verdicts"] + "." for b in doc.field_reports] + [""]
    for block in doc.field_reports:
        lines += [f"### {block['label']}: {block['title']}", "",
                  f"{block['source']}; {block['hardware']}.",
                  f"Their conclusion: {block['conclusion']}.", ""]
        if block["claims"]:
            lines += _table(["claim", "their words", "rule", "verdict", "here",
                             "why not, and what would settle it"],
                            [[c["claim"], c["quote"], c["rule"], c["verdict"], _pairs(c),
                              "; ".join(x for x in (c["why"], c["settle"]) if x)]
                             for c in block["claims"]]) + [""]
        if block["rows"]:
            lines += _table(["comparison", "theirs", "here", "cells here", "note"],
                            [[r["what"], r["theirs_shown"], r["here"],
                              "; ".join(r["ours_cells"]), r["note"]]
                             for r in block["rows"]]) + [""]
        for table in block.get("tables", []):
            lines += _own_table(table)
    return lines


def _pairs(claim: dict) -> str:
    """A claim's comparisons in a few words: each ratio, where measured, and its outcome."""
    said = []
    for p in claim["pairs"]:
        at = f" at {p['at']}" if p.get("at") else ""
        if p.get("ratio") is None:
            said.append(f"{p['what']}{at}: none")
            continue
        lo, hi = p.get("ci95") or (p["ratio"], p["ratio"])
        said.append(f"{p['what']}{at}: {p['ratio']:.2f}× ({lo:.2f}–{hi:.2f}), {p['where']}: "
                    f"{p['verdict']}")
    return "; ".join(said)


def render_fleet(doc: dict) -> str:
    """The fleet report (:func:`cryptcost.report.fleet.build`) in Markdown."""
    from cryptcost.report.fleet import cell_text
    cols = doc["columns"]
    lines = [f"# {doc['title']}", "", "## Hosts", ""]
    lines += _table(["column", "run", "status", "host", "CPU", "cores", "crypto flags", "kernel"],
                    [[c["label"], c["run"], c["status"], c["hostname"], c["cpu"], c["cores"],
                      c["crypto_flags"], c["kernel"]] for c in cols])
    lines += [""] + [f"> **{c['label']}: {c['emulated']}**" for c in cols if c["emulated"]]
    lines += ["", "## What differs between the hosts", ""]
    lines += [f"- {s}" for s in doc["differences"]] or ["- one host: nothing to compare"]
    lines += ["", "## Recommendation per host", ""]
    for rec in doc["recommendations"]:
        if rec["same"]:
            lines += [f"**{rec['title']}** (every host; the figures are "
                      f"{rec['hosts'][0]['host']}'s): {rec['hosts'][0]['text']}", ""]
            continue
        lines += [f"**{rec['title']}**, host by host:", ""]
        lines += [f"- {h['host']}: {h['text']}" for h in rec["hosts"]] + [""]
    lines += ["## The hosts side by side", "",
              "Each result's median on each host, and its overhead against its baseline there "
              "(n.s.: not significant).", ""]
    lines += _table(["result"] + [c["label"] for c in cols],
                    [[r["label"]] + [cell_text(r["hosts"].get(c["label"])) for c in cols]
                     for r in doc["rows"]])
    if doc["environment"]:
        lines += ["", "## Environment differences", ""]
        first = next(c["label"] for c in cols if not c["pair"])
        lines += _table(["host", "what", first, "there"],
                        [[host, d["what"], d["a"], d["b"]]
                         for host, diffs in doc["environment"].items() for d in diffs])
    if doc["not_measured"]:
        lines += ["", "## Not measured", ""]
        lines += _table(["host", "what", "why", "how to get it"],
                        [[host, m.what, m.why, m.install]
                         for host, ms in doc["not_measured"].items() for m in ms])
    return "\n".join(lines) + "\n"


def _own_table(t: dict) -> list[str]:
    """A field report's own table, theirs beside ours column by column."""
    from cryptcost.report.fieldreports import table_text
    vs = f"; × against {t['reference']}" if t["reference"] else ""
    head = [""] + [f"{side} {c}" for c in t["columns"] for side in ("theirs", "here")]
    rows = [[r["name"]] + [table_text(cell, side) for cell in r["cells"]
                           for side in ("theirs", "ours")] for r in t["rows"]]
    if any(r.get("why_not") for r in t["rows"]):
        head.append("none here, because")
        rows = [row + [r.get("why_not") or ""] for row, r in zip(rows, t["rows"])]
    return [f"{t['what']} ({t['unit']}{vs}):", ""] + _table(head, rows) + [""]
