"""The ``pytest-llm-latency`` command (``main.py``; its ``SUBCOMMANDS`` table lists them): one module
per subcommand with ``add_arguments(parser)`` and ``run(args)``: ``ceiling`` (decode and prefill
ceilings), ``compare`` (the deploy gate), ``serve-reference`` (the embedded reference server) and the
request-rate capacity search.  ``python -m pytest_llm_latency.cli`` runs it."""
