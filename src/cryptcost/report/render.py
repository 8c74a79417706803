"""A stored run in one format: the dispatch every command that writes a
report uses (``report``, ``run``)."""

from __future__ import annotations

from cryptcost.errors import UserError
from cryptcost.record import read
from cryptcost.report import document, export, markdown

FORMATS = ("terminal", "md", "html", "json", "csv")


def render(fmt: str, run, results: list[dict], model: dict | None = None,
           guests: list[list[dict]] = ()) -> str:
    """The report of ``run`` in ``fmt``: a pure function of stored data (``guests``: the results
    of each emulated run it is linked to, which its field reports read)."""
    if fmt == "csv":
        return export.to_csv(run, results)
    # the JSON read once; the exports pass it on as stored
    records = read(results)
    doc = document.build(run, records, model, guests=guests)
    if fmt == "json":
        return export.to_json(run, results, doc)
    if fmt == "md":
        return markdown.render(doc)
    if fmt == "html":
        from cryptcost.report import charts, html     # matplotlib: only when drawing
        return html.render(doc, charts.all_charts(records, doc))
    raise UserError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS[1:])}")


def render_fleet(fmt: str, members) -> str:
    """A fleet report (:mod:`cryptcost.report.fleet`) of several stored runs in ``fmt``."""
    from cryptcost.report import fleet
    if fmt == "csv":
        return export.to_csv_many([(m.run, m.results, m.label) for m in members])
    doc = fleet.build(members)
    if fmt == "json":
        return export.dumps(doc)
    if fmt == "md":
        return markdown.render_fleet(doc)
    if fmt == "html":
        from cryptcost.report import charts, html
        return html.render_fleet(doc, {"overhead": charts.fleet_overhead(doc)})
    raise UserError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS[1:])}")
