"""Prompts as the server counts them, before anything is measured: its tokenizer and the
run's nonce (``tokens``), a trace replay's prompts (``trace_prompts``) and the per-chunk token
counts of a stream (``chunk_counts``).

May import ``client.transport``, ``client.apis``, ``client.server`` and ``core``."""
