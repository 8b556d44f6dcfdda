"""The pure layer: no pytest, no httpx, no I/O (``tests/architecture/test_layers.py``).

Its folders are the stages a workload goes through, in order -- ``measure`` (one request's record
and the statistics of a sample), ``prompts`` (synthetic prompts to an exact token count), ``spec``
(what a workload asks: YAML keys, budgets, load, traces), ``result`` (the typed result and its
parts), ``roofline`` (the hardware ceilings and the model's bytes), ``checks`` (every rule that
can change a verdict).  A stage may import the stages before it and the base modules here
(``errors``, ``statuses``, ``findings``, ``redact``, ``hosts``: the vocabulary every stage uses),
never a later one; the base modules import no stage."""
