"""What a workload asks for, parsed and checked before anything is sent: the ``Workload`` and
its classes (``workload``), budgets and their keys (``budgets``, ``prompt_buckets``), length
distributions, arrival schedules and the load (``lengths``, ``schedule``, ``load_spec``,
``worker_sizing``), agent sessions, traces and their token accounting (``agent_spec``,
``trace_spec``, ``trace``, ``trace_tokens``), the prefill sweep and the rate sweep
(``prefill_spec``, ``rate_sweep``), and renamed keys (``renamed_keys``).

May import ``core.measure``, ``core.prompts`` and the base modules of ``core``."""
