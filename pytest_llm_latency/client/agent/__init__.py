"""The agent loop: one session of tool-calling turns (``loop``), its prepared prompts and
result (``plan``), and sessions dealt over worker processes (``shard``, ``workers``).

May import the client's earlier stages (``transport`` to ``placement``) and ``core``."""
