"""Sending one prepared prompt, the same in the test process and in every worker process or Ray
node: ``sender`` makes the call that never raises for a server fault, ``no_gc_pauses`` keeps the
garbage collector out of the timed window."""
from __future__ import annotations

import contextlib
import gc
from typing import Callable

from ...core.errors import MeasurementError
from ...core.prompts.synthesis import Prompt
from ...core.measure.record import RequestRecord
from ...core.result.result import Failure


def sender(client, output_tokens: int, extra: dict | None) -> Callable[..., "RequestRecord | Failure"]:
    """``one(prompt, t_scheduled_ns=None)``: send one prepared prompt on ``client`` (its own output
    length if drawn, else ``output_tokens``); a server fault is a ``Failure``, never raised.  The
    controller's and every worker process's (``client/placement/processes/workers.py``) way of sending."""
    def one(p: Prompt, t_scheduled_ns: int | None = None) -> RequestRecord | Failure:
        try:
            out = output_tokens if p.output_tokens is None else p.output_tokens  # its own, if drawn
            rec = client.stream(p.system, p.user, out, expected_prompt_tokens=p.expected_tokens, extra=extra)
            rec.t_scheduled_ns = t_scheduled_ns
            return rec
        except MeasurementError as exc:
            partial = getattr(exc, "partial", None)
            if t_scheduled_ns is not None and isinstance(partial, RequestRecord):
                partial.t_scheduled_ns = t_scheduled_ns
            return Failure.from_error(exc)  # keeps the TTFT and gaps measured before the failure
    return one


@contextlib.contextmanager
def no_gc_pauses():
    """Collect first, then keep the cyclic garbage collector off while samples stream: a
    gen-2 collection in a big test process pauses for tens of milliseconds, which would land
    inside an ITL or TTFT (as timeit does for the same reason).  Restored afterwards."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
