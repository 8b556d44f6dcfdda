"""Mixed traffic (issue 37): one workload's requests drawn from several classes, sent as one loop
against one server, every class judged on its own budgets (``core.checks.mix``).

YAML (docs/sharing-a-server.md)::

    mix:
      chat: {weight: 0.9, prompt_tokens: 512, output_tokens: 128}
      long_summarization: {weight: 0.1, prompt_tokens: 16000, output_tokens: 256}
    slo:
      chat: {ttft_p95: 500ms, itl_stall_p99: 60ms}
      long_summarization: {ttft_p95: 5s, tpot_p95: 50ms}

A class's lengths are integers or distributions (``core.spec.lengths``); a class named after a
built-in class (or with ``class:``) takes that class's lengths and budgets where it gives none.
Which request belongs to which class: ``class_sequence`` -- exact counts (largest remainder of
weight x requests), in a seeded random order, so two arms of an A/B run or a sweep send the same
classes in the same order.  Pure."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Any, Mapping

from ..measure.coldstart import COLD_BUDGET
from .budgets import BUDGET_KEYS, Budget, did_you_mean, parse_budget, parse_int
from .lengths import LengthDist, parse_length
from ..errors import ConfigError

MIX_KEY = "mix"
CLASS_KEYS = ("weight", "class", "prompt_tokens", "output_tokens", "system_prompt_tokens")
#: weights must sum to 1 within this
WEIGHT_TOLERANCE = 1e-6
#: workload keys a mix does not take -> what to do instead
MIX_CLASHES = {
    **dict.fromkeys(("prompt_tokens", "output_tokens", "class", "system_prompt_tokens"),
                    "each class of the mix gives its own (mix: {chat: {weight: 0.9, prompt_tokens: 512, "
                    "output_tokens: 128}, ...})"),
    **dict.fromkeys(("shared_prefix_tokens", "shared_prefix_groups"),
                    "a mix sends salted, unshared prompts per class"),
    "prompt_sweep": "a prompt sweep is a workload of its own (TTFT against prompt length at concurrency 1)",
    "structured": "structured output is judged against unconstrained twins of one class: give it its own workload",
    "trace": "a trace's rows give every request's lengths: replay it as its own workload",
    "steps": "agent sessions are a workload of their own",
}


#: budgets a class cannot take, and why: they are not judged on a class's requests (``core.checks.mix``'s
#: CLASS_CHECKS judge samples, per-request budgets and stalls), so a class would never be judged on them
WHOLE_RUN_ONLY = {
    "kv_transfer": "the KV transfer is judged on the pools' transfer histograms, which count every class's "
                   "transfers together",
    COLD_BUDGET: "the cold start is one request sent after unloading the model, not a share of the mix",
}


@dataclass(frozen=True)
class MixClass:
    """One class of a mix: its share of the requests, its lengths and its own budgets."""
    name: str
    weight: float
    prompt_tokens: "int | LengthDist"
    output_tokens: "int | LengthDist"
    budgets: tuple[Budget, ...]
    system_prompt_tokens: int = 0
    klass: str = "custom"                # the built-in class it took defaults from, else custom

    @property
    def nominal_prompt(self) -> int:
        p = self.prompt_tokens
        return p if isinstance(p, int) else p.nominal

    @property
    def nominal_output(self) -> int:
        o = self.output_tokens
        return o if isinstance(o, int) else o.nominal


@dataclass(frozen=True)
class Mix:
    """The classes, in the order given.  ``start`` / ``cycle``: the window of the class sequence this
    workload sends (an A/B run's or a sweep's block: ``window``); cycle None = the workload's samples."""
    classes: tuple[MixClass, ...]
    start: int = 0
    cycle: int | None = None

    def by_name(self) -> dict[str, MixClass]:
        return {c.name: c for c in self.classes}

    def describe(self) -> str:
        return ", ".join(f"{c.name} {c.weight:g}" for c in self.classes)


def parse_mix(value: Any, slo: Any, where, builtin: Mapping[str, Any], requests: Any = None) -> Mix:
    """The ``mix:`` mapping with the workload's per-class ``slo:``.  ``where(path)`` names a key;
    ``builtin``: the built-in classes (name -> ``WorkloadClass``); ``requests``: the workload's
    number of requests when fixed (every class must get at least one)."""
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(f"{where((MIX_KEY,))}: expected a mapping of classes like "
                          f"{{chat: {{weight: 0.9, prompt_tokens: 512, output_tokens: 128}}, long_summarization: "
                          f"{{weight: 0.1, prompt_tokens: 16000, output_tokens: 256}}}}, got {value!r}")
    if len(value) < 2:
        raise ConfigError(f"{where((MIX_KEY,))}: a mix needs at least two classes, got {', '.join(map(str, value))} "
                          f"-- for one class drop mix: and give its lengths and budgets directly")
    if slo is not None and not isinstance(slo, Mapping):
        raise ConfigError(f"{where(('slo',))}: a mixed workload's slo is a mapping per class, e.g. "
                          f"slo: {{chat: {{ttft_p95: 500ms}}}}, got {type(slo).__name__}")
    slo = dict(slo or {})
    for name in slo:
        if name not in value:
            hint = did_you_mean(name, list(value))
            budget = f" ({name!r} is a budget: put it under a class, slo: {{<class>: {{{name}: ...}}}})" \
                if name in BUDGET_KEYS else ""
            raise ConfigError(f"{where(('slo', name))}: {name!r} is not a class of the mix{hint}{budget} -- a mixed "
                              f"workload's budgets are per class: slo: {{{', '.join(map(str, value))}: ...}}")
    classes = tuple(_class(str(name), spec, slo.get(name), where, builtin) for name, spec in value.items())
    total = sum(c.weight for c in classes)
    if abs(total - 1.0) > WEIGHT_TOLERANCE:
        shares = " + ".join(f"{c.weight:g}" for c in classes)
        raise ConfigError(f"{where((MIX_KEY,))}: the class weights must sum to 1, got {shares} = {total:g} -- "
                          f"they are each class's share of the requests")
    if isinstance(requests, int):
        short = [c for c in classes if requests * c.weight < 1]
        if short:
            c = short[0]
            raise ConfigError(f"{where((MIX_KEY, c.name, 'weight'))}: {c.name} (weight {c.weight:g}) would get no "
                              f"request of {requests} -- raise requests to at least {math.ceil(1 / c.weight)}")
    return Mix(classes)


def _class(name: str, spec: Any, slo: Any, where, builtin: Mapping[str, Any]) -> MixClass:
    at = (MIX_KEY, name)
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where(at)}: expected a mapping like {{weight: 0.9, prompt_tokens: 512, "
                          f"output_tokens: 128}}, got {spec!r}")
    for k in spec:
        if k not in CLASS_KEYS:
            raise ConfigError(f"{where(at + (k,))}: unknown key {k!r}{did_you_mean(k, CLASS_KEYS)} -- a mix class "
                              f"takes {', '.join(CLASS_KEYS)} (its budgets go in slo: {{{name}: ...}})")
    weight = spec.get("weight")
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight <= 0:
        raise ConfigError(f"{where(at + ('weight',))}: expected the class's share of the requests, a number > 0 "
                          f"(the weights sum to 1), got {weight!r}")
    klass = spec.get("class", name if name in builtin else "custom")
    if klass != "custom" and klass not in builtin:
        raise ConfigError(f"{where(at + ('class',))}: unknown workload class {klass!r}{did_you_mean(klass, builtin)}"
                          f" -- use one of {', '.join(builtin)}, or give prompt_tokens and output_tokens")
    base = builtin.get(klass)
    lengths = []
    for key in ("prompt_tokens", "output_tokens"):
        if key not in spec and base is None:
            raise ConfigError(f"{where(at)}: class {name!r} is not a built-in class: give its prompt_tokens and "
                              f"output_tokens (or class: one of {', '.join(builtin)})")
        lengths.append(parse_length(spec[key], where(at + (key,))) if key in spec
                       else getattr(base, key))
    system = parse_int(spec.get("system_prompt_tokens", base.system_prompt_tokens if base else 0),
                       where(at + ("system_prompt_tokens",)), 0)
    prompt = lengths[0] if isinstance(lengths[0], int) else lengths[0].nominal
    if system and system >= (lengths[0] if isinstance(lengths[0], int) else (lengths[0].min or prompt)):
        raise ConfigError(f"{where(at + ('system_prompt_tokens',))}: system_prompt_tokens ({system}) must be "
                          f"smaller than the class's prompt_tokens")
    if slo is not None and not isinstance(slo, Mapping):
        raise ConfigError(f"{where(('slo', name))}: expected the class's budgets like {{ttft_p95: 500ms}}, "
                          f"got {slo!r}")
    given: dict[str, tuple[Any, str]] = {k: (v, "class default") for k, v in (base.budgets.items() if base else ())}
    given.update({k: (v, where(("slo", name, k))) for k, v in (slo or {}).items()})
    budgets = tuple(parse_budget(k, v, src) for k, (v, src) in given.items() if v is not None)
    for b in budgets:
        if b.key in WHOLE_RUN_ONLY or b.is_kv_transfer:
            why = WHOLE_RUN_ONLY.get(b.key, WHOLE_RUN_ONLY["kv_transfer"])
            raise ConfigError(f"{b.source}: a mix class cannot take {b.key}: {why} -- measure it in a workload of "
                              f"its own against the same target (slo: {{{b.key}: ...}})")
    if not budgets:
        raise ConfigError(f"{where(('slo', name))}: class {name!r} of the mix has no budgets -- every class is "
                          f"judged on its own: add slo: {{{name}: {{ttft_p95: ..., tpot_p95: ...}}}}")
    return MixClass(name, float(weight), lengths[0], lengths[1], budgets, system, klass)


def class_counts(mix: Mix, n: int) -> list[int]:
    """Each class's number of ``n`` requests: ``floor(weight x n)``, the rest to the largest remainders
    (ties: the order given).  Exact: they sum to ``n``."""
    raw = [c.weight * n for c in mix.classes]
    counts = [int(math.floor(r + 1e-9)) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] - counts[i]), i))
    for i in order[:n - sum(counts)]:
        counts[i] += 1
    return counts


def class_sequence(mix: Mix, n: int, seed: int, *, start: int | None = None, cycle: int | None = None) -> list[str]:
    """The classes of requests ``start .. start + n - 1`` of one endless sequence made of cycles of
    ``cycle`` requests, each cycle the exact ``class_counts`` in a seeded random order (cycle ``k``
    shuffled with ``(seed, k)``).  ``start`` / ``cycle`` default to the mix's window (``window``) and
    to ``n``: a workload sends one whole cycle; the blocks of an A/B run or a sweep send consecutive
    windows of the run's cycle, so every arm sends the same classes in the same order."""
    start = mix.start if start is None else start
    cycle = cycle or mix.cycle or n
    out: list[str] = []
    k = start // cycle
    while len(out) < n:
        seq = [c.name for c, m in zip(mix.classes, class_counts(mix, cycle)) for _ in range(m)]
        random.Random(f"mix|{seed}|{k}").shuffle(seq)
        lo = start - k * cycle if not out else 0
        out += seq[lo:lo + n - len(out)]
        k += 1
    return out


def window(mix: Mix | None, start: int, cycle: int) -> Mix | None:
    """``mix`` sending requests ``start ..`` of a run of ``cycle`` requests (one block of an A/B run or a sweep)."""
    return None if mix is None else replace(mix, start=start, cycle=cycle)


def mix_workload_spec(spec: Mapping[str, Any], where,
                      builtin: Mapping[str, Any]) -> tuple[Mix | None, Mapping[str, Any]]:
    """The workload's mix, and ``spec`` made ready for ``core.spec.workload.make_workload``: class
    ``custom``, the lengths the requests' weighted mean (placeholders where one number is needed:
    each request sends its class's), the per-class ``slo`` taken out.  A clashing key is an error."""
    if spec.get(MIX_KEY) is None:
        return None, spec
    for key, instead in MIX_CLASHES.items():
        if key in spec:
            raise ConfigError(f"{where((key,))}: a mixed workload does not take {key}: {instead} -- drop {key}")
    requests = spec.get("requests", spec.get("samples"))
    if requests == "auto" or "min_samples" in spec or "max_samples" in spec:
        key = "min_samples" if "min_samples" in spec else "max_samples" if "max_samples" in spec else "samples"
        raise ConfigError(f"{where((key,))}: a mixed workload sends a fixed number of requests (each class judged "
                          f"on its share): give requests: N, not samples: auto")
    mix = parse_mix(spec[MIX_KEY], spec.get("slo"), where, builtin, requests if isinstance(requests, int) else None)
    mean = lambda f: max(1, round(sum(c.weight * f(c) for c in mix.classes)))  # noqa: E731
    rest = {k: v for k, v in spec.items() if k not in (MIX_KEY, "slo")}
    return mix, {**rest, "class": "custom", "prompt_tokens": mean(lambda c: c.nominal_prompt),
                 "output_tokens": mean(lambda c: c.nominal_output)}
