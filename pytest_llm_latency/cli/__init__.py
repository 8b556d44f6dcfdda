"""The ``pytest-llm-latency`` command (``main.py``): ``ceiling`` (``ceiling.py``) and
``serve-reference`` (``serve_reference.py``).  ``python -m pytest_llm_latency.cli`` runs it."""
