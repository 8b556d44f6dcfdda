"""One class of a mixed workload as a workload of its own (``core.spec.mix_spec``): what ``core.checks.mix``
judges the class as, and what the sample-size check holds each class's budgets to."""
from __future__ import annotations

from dataclasses import replace

from .mix_spec import MixClass
from .workload import Workload


def class_workload(w: Workload, c: MixClass, requests: int) -> Workload:
    """The workload one class of ``w`` is judged as: its lengths and budgets, ``w``'s statistics."""
    return replace(w, name=f"{w.name}[{c.name}]", klass=c.klass, prompt_tokens=c.nominal_prompt,
                   output_tokens=c.nominal_output, system_prompt_tokens=c.system_prompt_tokens,
                   prompt_dist=None if isinstance(c.prompt_tokens, int) else c.prompt_tokens,
                   output_dist=None if isinstance(c.output_tokens, int) else c.output_tokens,
                   budgets=c.budgets, samples=max(requests, 1), mix=None, prompt_budgets=())
