"""The embedded reference target: a real HTTP server whose timing follows the roofline.

It speaks vLLM's OpenAI API (``/v1/completions``, ``/v1/chat/completions``, ``/tokenize``,
``/v1/models``, ``/metrics``) and Ollama's (``/api/generate``, ``/api/chat``), and times
every token with the prefill/decode physics of a catalog device and model.

* ``config.py``    -- ``ReferenceConfig``, every knob (URL query keys and CLI options);
* ``physics.py``   -- the pure timing model (formulas: docs/servers.md#timing-model);
* ``engine.py``    -- the pure scheduler state machine (batching, KV pool, prefix cache,
  chunked prefill);
* ``residency.py`` -- Ollama's model residency (load on first request, ``keep_alive``);
* ``scheduler.py`` -- runs engine steps in real time on absolute deadlines;
* ``http.py``, ``server.py``, ``openai_api.py``, ``ollama_api.py``, ``streaming.py``,
  ``metrics.py`` -- the HTTP side; ``tokenizer.py`` -- one token per word;
* ``faults.py``    -- fault injection (``--fault`` or the ``X-Reference-Fault`` header);
* ``launch.py``    -- ``parse_reference_url`` and ``start_reference``; the command
  ``pytest-llm-latency serve-reference`` is ``pytest_llm_latency/cli/serve_reference.py``.

Nothing is imported here, so importing the package stays cheap.
"""
