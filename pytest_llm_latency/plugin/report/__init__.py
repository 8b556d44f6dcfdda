"""The renderers over one typed report: the result document (``document``) and its typed
entries (``entry``), the terminal summary, the HTML page and its charts, JUnit properties, the
JSON schema and the CI step summary.  Renderers read attributes, never ``.get``
(``tests/architecture/test_renderers.py``)."""
