"""One adapter per streaming dialect: OpenAI completions and chat (``openai``), Ollama
(``ollama``), and the target that picks one (``target.make_client``).

May import ``client.transport`` and ``core``."""
