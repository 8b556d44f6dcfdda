"""Sending one prepared prompt, the same in the test process and in every worker process or Ray
node: ``sender`` makes the call that never raises for a server fault, ``no_gc_pauses`` keeps the
garbage collector out of the timed window."""
from __future__ import annotations

import contextlib
import gc
from dataclasses import replace
from typing import Callable

from ...core.errors import MeasurementError
from ...core.prompts.synthesis import Prompt
from ...core.measure.record import RequestRecord
from ...core.result.result import Failure
from ...core.spec.structured_spec import schema_fields
from .schema_check import SCHEMA_VIOLATION, answer_text, schema_problem


def sender(client, output_tokens: int, extra: dict | None) -> Callable[..., "RequestRecord | Failure"]:
    """``one(prompt, t_scheduled_ns=None)``: send one prepared prompt on ``client`` (its own output
    length if drawn, else ``output_tokens``); a server fault is a ``Failure``, never raised.  The
    controller's and every worker process's (``client/placement/processes/workers.py``) way of sending.

    A prompt of a structured workload (``Prompt.structured``) carries its own fields: a constrained one
    adds the schema's request fields (``core.spec.structured_spec.schema_fields``) to ``extra`` and
    its answer must validate (else a ``schema_violation`` failure); the outcome keeps its role, and a
    mixed workload's prompt its class (``Prompt.mix_class``)."""
    def one(p: Prompt, t_scheduled_ns: int | None = None) -> RequestRecord | Failure:
        ask = p.structured
        fields = extra
        try:
            if ask is not None and ask.constrained:
                fields = {**(extra or {}), **schema_fields(client.api_name, ask.name, ask.schema)}
            out = output_tokens if p.output_tokens is None else p.output_tokens  # its own, if drawn
            rec = client.stream(p.system, p.user, out, expected_prompt_tokens=p.expected_tokens, extra=fields)
            rec.t_scheduled_ns = t_scheduled_ns
            rec.mix_class = p.mix_class
            if ask is None:
                return rec
            rec.structured = ask.role
            if ask.constrained:
                problem = schema_problem(answer_text(rec), ask.schema)
                if problem is not None:
                    exc = MeasurementError(SCHEMA_VIOLATION, problem)
                    exc.partial = rec
                    raise exc
            return rec
        except MeasurementError as exc:
            partial = getattr(exc, "partial", None)
            if t_scheduled_ns is not None and isinstance(partial, RequestRecord):
                partial.t_scheduled_ns = t_scheduled_ns
            failure = Failure.from_error(exc)  # keeps the TTFT and gaps measured before the failure
            return replace(failure, structured=None if ask is None else ask.role, mix_class=p.mix_class)
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
