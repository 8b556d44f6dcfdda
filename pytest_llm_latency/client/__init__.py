"""The client layer: everything that talks to a server, in stages -- ``transport`` (HTTP,
framing, stamps), ``apis`` (one adapter per streaming dialect), ``server`` (``/metrics``, the
served dtype), ``prepare`` (prompts as the server counts them), ``load`` (the load engine),
``placement`` (where requests run: this process, worker processes, Ray), ``agent`` (the agent
loop), ``drivers`` (how requests are sent) and ``runner`` (``measure``: one pass down them).

A stage may import the stages before it, ``core`` and this module's ``APIS``; never a later one
(``tests/architecture/test_layers.py``)."""

#: the streaming API dialects the plugin speaks (``--llm-latency-api``)
APIS = ("openai-completions", "openai-chat", "openai-responses", "anthropic-messages", "ollama", "ollama-chat")
