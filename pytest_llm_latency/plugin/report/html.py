"""The self-contained HTML latency report: one file, inline CSS and SVG, no script, no
font or image from anywhere (readable offline and as a CI artifact).

``page.build`` turns the results document, typed (``report.entry``), into the page's
context, the chart functions draw the SVG, and a Jinja2 template (autoescaped: every
string from a result is escaped; only the charts' SVG, built by ElementTree, is inserted
as markup) lays it out.  Jinja2 is imported here, only when a report is written.
"""
from __future__ import annotations

from .document import ResultDocument
from .page import build

TEMPLATE = "report.html.j2"


def render(doc: ResultDocument | dict) -> str:
    """The page of ``doc`` (a JSON document is parsed first: ``ResultDocument.parse``)."""
    import jinja2
    import markupsafe  # jinja2's own dependency

    env = jinja2.Environment(loader=jinja2.PackageLoader("pytest_llm_latency.plugin.report", "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["svg"] = markupsafe.Markup  # chart SVG from ElementTree: already escaped
    return env.get_template(TEMPLATE).render(**build(doc))
