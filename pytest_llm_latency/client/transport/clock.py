"""The measurement clock: the one default every record, lag monitor and schedule is stamped with
(docs/concepts.md: shared by every process of a host, unlike ``perf_counter_ns``, which promises no
common origin).  Code that needs to know whether a record keeps it compares ``is MEASUREMENT_CLOCK``."""
from __future__ import annotations

import time

#: ns, ``CLOCK_MONOTONIC``: comparable across the processes of one host
MEASUREMENT_CLOCK = time.monotonic_ns
