"""The self-contained HTML latency report (docs/reports.md#html): ``page.build``'s context laid out by
a Jinja2 template, autoescaped (only the charts' SVG, built by ElementTree, is inserted as markup).
Jinja2 is imported here, only when a report is written."""
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
