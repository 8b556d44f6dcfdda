"""The pytest layer: hooks (the ``llm_latency`` entry point is ``plugin.hooks``),
options, session state in ``config.stash``, marker and fixture, YAML collection,
the roofline gate and the reports."""
