"""What a request's stream yields and the statistics of a sample: the ``RequestRecord``
(``record``), the one definition of every metric (``metrics``), summaries, confidence bounds and
statistical verdicts (``stats``, ``confidence``, ``verdict``), the deploy gate's comparison
(``compare``), what bunched tokens and stamp bounds say of the client (``bunching``,
``stamp_bounds``), cold starts, reasoning and tool-call figures, speculative decoding's figures
(``spec_decode``, ``decode_totals``), the server's own ``/metrics`` model (``server_model``), and
whether a prefix cache served a sample (``prefix_cache``, ``agent_turns``).

May import the base modules of ``core`` only (the first stage)."""
