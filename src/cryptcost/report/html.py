"""The HTML report: one self-contained file (inline CSS and SVG, no script,
nothing fetched), a pure function of the report document and its charts."""

from __future__ import annotations

from jinja2 import Environment, PackageLoader, select_autoescape

_env = Environment(loader=PackageLoader("cryptcost", "report/templates"),
                   autoescape=select_autoescape(["html", "j2"]), trim_blocks=True,
                   lstrip_blocks=True)


def render(doc: dict, charts: dict[str, str]) -> str:
    from cryptcost.report import answer
    from cryptcost.report.fieldreports import table_text
    return _env.get_template("report.html.j2").render(
        doc=doc, charts=charts, table_text=table_text, answer_grid=answer.grid,
        answer_legend=answer.legend, answer_pick=answer.pick)


def render_fleet(doc: dict, charts: dict[str, str]) -> str:
    from cryptcost.report.fleet import cell_text
    return _env.get_template("fleet.html.j2").render(doc=doc, charts=charts, cell_text=cell_text)
