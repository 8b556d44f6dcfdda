"""Protocol adapters: decoders, streaming clients, /metrics."""

#: the streaming API dialects the plugin speaks (``--llm-latency-api``)
APIS = ("openai-completions", "openai-chat", "ollama", "ollama-chat")
