"""The typed result of a run: ``WorkloadResult`` and its figures (``result``), its parts
(``result_parts``: the JSON document's sections), what a run established (``facts``), an A/B arm
measured in blocks (``blocks``), goodput and fluidity (``goodput``), whether a fixed sample can pass
(``sample_size``), and why a budget failed (``diagnosis``, ``why``).

May import ``core.measure``, ``core.prompts``, ``core.spec`` and the base modules of ``core``."""
