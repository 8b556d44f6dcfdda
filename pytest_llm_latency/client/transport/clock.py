"""The measurement clock: the one default every record, lag monitor and schedule is stamped with.

``time.monotonic_ns`` reads the host's ``CLOCK_MONOTONIC``, whose origin is shared by every
process of one host, so records stamped by worker processes (``client/placement/processes/workers.py``) compare
with each other and with the controller's due times.  ``time.perf_counter_ns`` promises no common
origin (on Linux it reads the same clock, elsewhere it may not).  Tests inject their own clocks;
code that needs to know whether a record keeps this clock compares with ``is MEASUREMENT_CLOCK``."""
from __future__ import annotations

import time

#: ns, ``CLOCK_MONOTONIC``: comparable across the processes of one host
MEASUREMENT_CLOCK = time.monotonic_ns
