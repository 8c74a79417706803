"""The HTML report: one self-contained file (inline CSS and SVG, no script,
nothing fetched), a pure function of the report document and its charts."""

from __future__ import annotations

import re

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import escape

_env = Environment(loader=PackageLoader("cryptcost", "report/templates"),
                   autoescape=select_autoescape(["html", "j2"]), trim_blocks=True,
                   lstrip_blocks=True)


def render(doc, charts: dict[str, str]) -> str:
    from cryptcost.report import answer
    from cryptcost.report.fieldreports import table_text
    return fold(_env.get_template("report.html.j2").render(
        doc=doc, charts=charts, table_text=table_text, answer_grid=answer.grid,
        answer_legend=answer.legend, answer_pick=answer.pick, sentences=sentences,
        paragraphs=paragraphs), doc)


SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)(?<!e\.g\. )(?<!i\.e\. )(?<!vs\. )")


def sentences(text: str) -> list[str]:
    """A text's sentences, each on its own (a recommendation as a list, not a paragraph)."""
    return [s for s in SENTENCE.split(text.strip()) if s]


def paragraphs(text: str, most: int = 3) -> list[str]:
    """A text as paragraphs of at most ``most`` sentences."""
    said = sentences(text)
    return [" ".join(said[i:i + most]) for i in range(0, len(said), most)]


H2 = re.compile(r'<h2 id="(?P<id>[^"]+)">(?P<title>.*?)</h2>', re.S)


def _n(items, one: str, many: str | None = None) -> str:
    n = len(items or [])
    return f"{n} {one if n == 1 else many or one + 's'}"


# each folded section's one line, from the document
SUMMARIES = {
    "summary": lambda d: "each use's recommendation in full, and the ranking",
    "split": lambda d: f"{_n(d.split, 'row')}: what each twin's layer costs, and what is "
                       "the encryption's own",
    "findings": lambda d: _n(d.findings, "finding"),
    "tuning": lambda d: _n(d.tuning, "stack variant comparison"),
    "throughput": lambda d: "each stack's throughput beside its baseline's, 95 % intervals",
    "overhead": lambda d: "each stack's overhead against its matched baseline",
    "cpu": lambda d: "CPU-seconds per GiB moved, per stack",
    "blocksizes": lambda d: "throughput against request size",
    "accel-cores": lambda d: f"what AES-NI is worth and how {_n(d.scaling_rows, 'cell')} "
                             "scale with CPUs",
    "model": lambda d: f"{_n(d.predictions, 'prediction')} on {d.target}",
    "storage": lambda d: f"{_n(d.storage, 'result')}, each with its bottleneck",
    "flames": lambda d: "a flame graph per profiled stack: where its CPU went",
    "network": lambda d: f"{_n(d.network, 'result')}, each with its bottleneck",
    "ciphers": lambda d: _n(d.ciphers, "result"),
    "unstable": lambda d: _n(d.unstable, "group") + " of results wider than their target",
    "field-reports": lambda d: f"{_n(d.field_reports_grid, 'claim')} of R1–R5 judged here",
    "not-measured": lambda d: _n(d.not_measured, "thing") + ", each with why and how to "
                                                                   "get it",
    "environment": lambda d: "the host, the tools' versions, the sittings",
}


def fold(page: str, doc) -> str:
    """Every section after the answer folded (``<details>``), its heading and a one-line summary
    shown; a link to a section's heading still lands on it."""
    found = [m for m in H2.finditer(page) if m.group("id") != "answer"]
    if not found:
        return page
    end = page.rindex("</body>")
    out, at = [page[:found[0].start()]], found[0].start()
    for i, m in enumerate(found):
        stop = found[i + 1].start() if i + 1 < len(found) else end
        said = SUMMARIES.get(m.group("id"), lambda d: "")(doc)
        out.append(f'<details class="section"><summary>{m.group(0)}'
                   + (f' <span class="small">{escape(said)}</span>' if said else "")
                   + f"</summary>{page[m.end():stop]}</details>\n")
        at = stop
    return "".join(out) + page[at:]


def render_fleet(doc: dict, charts: dict[str, str]) -> str:
    from cryptcost.report.fleet import cell_text
    return _env.get_template("fleet.html.j2").render(doc=doc, charts=charts, cell_text=cell_text)
