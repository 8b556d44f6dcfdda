"""Workload specs and the built-in workload classes (budgets: ``core.spec.budgets``; load: ``core.spec.load_spec``).

Pure: builds frozen dataclasses from plain mappings and raises ``ConfigError``
naming the key path and the fix.  Where a value came from (file:line, marker,
CLI) is supplied by the caller through ``where``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from .agent_spec import AGENT_BUDGET_KEYS, AGENT_CLASS, AGENT_KEYS, AgentSpec, make_agent
# budgets and load specs live in their own modules; their names are re-exported from here
from .budgets import (BUDGET_KEYS, FRACTION_BUDGETS, Budget, did_you_mean, parse_budget, parse_duration_ms,  # noqa: F401
    parse_int, parse_positive_number)
from ..measure.coldstart import COLD_BUDGET, COLD_STARTS
from ..measure.compare import parse_tolerances
from ..errors import ConfigError
from .lengths import LengthDist, PrefixGroups, parse_prefix_groups, workload_lengths
from .mix_spec import MIX_KEY, Mix, mix_workload_spec, trace_classes
from .prefill_spec import PREFILL_ROOFLINE_KEYS, PREFILL_SLO_KEYS, parse_prefill_slo, parse_prompt_sweep
from .prompt_buckets import BY_PROMPT_KEYS, PromptBudget, parse_prompt_budget, under
from .load_spec import (DURATION_MAX_REQUESTS, LOAD_KEYS, Load, default_workers, make_load, parse_workers, with_ray,
    with_workers)
from .renamed_keys import RENAMED_WORKLOAD_KEYS, upgrade_workload
from .request_fields import REQUEST_KEYS, RequestKeys, parse_request_keys
from .stall_spec import DEFAULT_STALL_PROMPT_TOKENS, STALL_KEYS, parse_stall_prompt_tokens
from .structured_spec import (OVERHEAD_BUDGET, STRUCTURED_KEY, StructuredSpec, check_structured, parse_structured,
    with_overhead)
from .server_sweep import KEY as SERVER_SWEEP, ServerSweep, check_sweep_workload, parse_server_sweep
from .trace_spec import TRACE_KEYS, TraceSpec, trace_workload_spec
# samples / confidence / inconclusive live in their own module; re-exported from here
from .statistics_spec import (DEFAULT_CONFIDENCE, DEFAULT_FIXED_SAMPLES, DEFAULT_MAX_SAMPLES, INCONCLUSIVE,  # noqa: F401
    default_horizon, with_statistics)


@dataclass(frozen=True)
class Workload:
    name: str
    klass: str
    prompt_tokens: int                # with a distribution: its nominal length (core.spec.lengths.LengthDist.nominal)
    output_tokens: int
    samples: int = 20
    warmup: int = 2
    system_prompt_tokens: int = 0     # part of prompt_tokens (agent: tool schemas)
    shared_prefix_tokens: int = 0     # >0: that many leading tokens identical across requests
    concurrency: int = 1
    max_error_rate: float = 0.0
    budgets: tuple[Budget, ...] = ()
    roofline: Mapping[str, Any] | None = field(default=None, compare=False)
    load: Load | None = None          # open loop / closed-loop timing (None: the plain closed loop)
    # core.spec.rate_sweep.SweepSpec (YAML ``rate_sweep:``): highest rate meeting the SLO
    sweep: Any = None
    cold_starts: str = "exclude"      # what a cold-start sample does: exclude | include | fail (core.measure.coldstart)
    # prefill roofline (issue 19): prompt lengths swept at concurrency 1, and its budgets
    prompt_sweep: tuple[int, ...] = ()
    prefill_slo: Mapping[str, tuple[Any, str]] = field(default_factory=dict, compare=False)  # key -> (value, where)
    # statistical verdicts (core.measure.verdict): confidence None = point estimate; samples: auto =
    # sequential between min_samples and max_samples (``samples`` is then max_samples)
    confidence: float | None = None
    inconclusive: str = "fail"
    sequential: bool = False
    min_samples: int = 10
    samples_given: bool = field(default=True, compare=False)  # False: ``samples`` is make_workload's default
    agent: AgentSpec | None = None    # multi-turn tool-calling sessions (issue 15, core.spec.agent_spec)
    # deploy gate (core.measure.compare): per-workload regression tolerances {ttft_p95: 0.1} (YAML/marker
    # ``regression:``)
    regression: Mapping[str, float] | None = field(default=None, compare=False)
    baseline_target: Any = field(default=None, compare=False)  # A/B in one run: a URL or {url|command: ...}
    # issue 27: per-request lengths drawn from a distribution (core.spec.lengths), and shared-prefix groups
    prompt_dist: LengthDist | None = None
    output_dist: LengthDist | None = None
    shared_prefix_groups: PrefixGroups | None = None
    # issue 27: a Mooncake trace replayed (core.spec.trace); its rows are the requests, so ``samples``
    # is set from the loaded rows and prompt/output_tokens are placeholders (1)
    trace: TraceSpec | None = None
    prompt_budgets: tuple[PromptBudget, ...] = ()  # ttft_<stat>_by_prompt (core.spec.prompt_buckets)
    # issue 28: worker processes sending the load (``client/placement/processes/workers.py``): N, or "auto"
    # (resolved when it runs)
    workers: int | str = 1
    # issue 28: ``ray: ADDRESS``: one shard per node of that Ray cluster (``client/placement/ray/shards.py``)
    ray: str | None = None
    # issue 36: ``reasoning`` / ``thinking`` as each API's fields (core.spec.request_fields), and ``structured``:
    # answers held to a JSON Schema, validated, the overhead budget (core.spec.structured_spec)
    request: RequestKeys | None = None
    structured: StructuredSpec | None = None
    # issue 37: classes sharing one loop, each judged on its own budgets (core.spec.mix_spec, core.checks.mix)
    mix: Mix | None = None
    # issue 37: a prefill of at least this many prompt tokens is long: the gaps of the streams beside it are
    # the stall gaps of the itl_stall_<stat> / stall_max budgets (core.spec.stall_spec)
    stall_prompt_tokens: int = DEFAULT_STALL_PROMPT_TOKENS
    # issue 37: the workload under N server settings, interleaved in blocks (core.spec.server_sweep)
    server_sweep: ServerSweep | None = None

    @property
    def cold_budget(self) -> Budget | None:
        return self.budget_map().get(COLD_BUDGET)

    def budget_map(self) -> dict[str, Budget]:
        return {b.key: b for b in self.budgets}


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    prompt_tokens: int
    output_tokens: int
    budgets: Mapping[str, Any]
    system_prompt_tokens: int = 0
    why: str = ""


BUILTIN_CLASSES: dict[str, WorkloadClass] = {
    "chat": WorkloadClass(
        "chat", 512, 128, {"ttft_p95": "500ms", "tpot_p95": "50ms"},
        why="A reader needs the first words within ~0.5 s and then >= 20 tok/s (50 ms/token), "
            "comfortable reading speed: latency = TTFT + 127 x TPOT <= 6.9 s for 128 tokens."),
    "agent": WorkloadClass(
        "agent", 2048, 32, {"tpot_p95": "30ms", "e2e_p95": "2s", "ttft_p95": "1s"}, system_prompt_tokens=1984,
        why="A tool call is short (32 tokens) and blocks the agent loop, so the whole call counts: "
            "E2E = TTFT + 31 x TPOT <= 1 s + 0.93 s fits the 2 s budget; TPOT comes first."),
    AGENT_CLASS: WorkloadClass(
        AGENT_CLASS, 2048, 32, {"turn_ttft_p95": "1s", "session_e2e_p95": "8s", "prefix_reuse_min": 0.9},
        why="A 5-step agent task: each turn re-sends a transcript that only grows, so each turn's TTFT is "
            "cheap only if the server reuses the previous turn's prefix (>= 90% of turn-2+ prompt tokens); "
            "the task's model time (5 x E2E, tool pauses excluded) fits 8 s."),
    "long_summarization": WorkloadClass(
        "long_summarization", 6000, 512, {"tpot_p95": "60ms", "ttft_p95": "5s"},
        why="A 6000-token document prefills for seconds; decode dominates the total: "
            "TTFT + 511 x TPOT <= 5 s + 30.7 s."),
}

WORKLOAD_KEYS = ("class", "prompt_tokens", "output_tokens", "samples", "warmup", "system_prompt_tokens",
                 "shared_prefix_tokens", "shared_prefix_groups", "concurrency", "max_error_rate", "slo", "roofline",
                 "cold_starts", "prompt_sweep",
                 "confidence", "inconclusive", "min_samples", "max_samples", "regression",
                 "baseline_target", SERVER_SWEEP, "workers", "ray", STRUCTURED_KEY, MIX_KEY) + REQUEST_KEYS \
    + AGENT_KEYS + LOAD_KEYS + TRACE_KEYS + STALL_KEYS


def make_workload(name: str, spec: Mapping[str, Any], where=lambda path: ".".join(map(str, path))) -> Workload:
    """Build a workload from a mapping (YAML ``workloads.<name>`` or marker kwargs).

    ``where(path)`` turns a key path into a human location ("chat.slo.yaml:7 workloads.chat.slo").
    Keys absent from ``spec`` come from the class (``class:``, default: the name if it is a class).
    Old key names (``core.spec.renamed_keys``) are accepted with a ``LatencyDeprecationWarning``.
    """
    for key in spec:
        if key not in WORKLOAD_KEYS and key not in RENAMED_WORKLOAD_KEYS:
            raise ConfigError(f"{where((key,))}: unknown key {key!r}{did_you_mean(key, WORKLOAD_KEYS)} -- "
                              f"allowed: {', '.join(WORKLOAD_KEYS)}")
    spec = upgrade_workload(spec, where)
    trace, spec = trace_workload_spec(spec, where)
    mix, spec = mix_workload_spec(spec, where, BUILTIN_CLASSES)
    if trace is not None:  # rows tagged by class: slo per class (core.spec.mix_spec.trace_classes)
        mix, spec = trace_classes(spec, where, BUILTIN_CLASSES)
    klass_name = spec.get("class", name if name in BUILTIN_CLASSES else AGENT_CLASS if "steps" in spec else "custom")
    if not isinstance(klass_name, str):
        raise ConfigError(f"{where(('class',))}: expected a class name ({', '.join(BUILTIN_CLASSES)} or custom), "
                          f"got {type(klass_name).__name__} {klass_name!r}")
    if klass_name != "custom" and klass_name not in BUILTIN_CLASSES:
        raise ConfigError(f"{where(('class',))}: unknown workload class {klass_name!r}"
                          f"{did_you_mean(klass_name, BUILTIN_CLASSES)} -- use one of "
                          f"{', '.join(BUILTIN_CLASSES)}, or 'custom' with prompt_tokens and output_tokens")
    base = BUILTIN_CLASSES.get(klass_name)
    sweep = parse_prompt_sweep(spec, where)
    if sweep:  # TTFT is what a sweep measures: one output token unless asked
        spec = {"prompt_tokens": sweep[-1], "output_tokens": 1, **spec}
    if base is None and ("prompt_tokens" not in spec or "output_tokens" not in spec):
        raise ConfigError(f"{where(())}: workload {name!r} has no built-in class: set prompt_tokens and "
                          f"output_tokens, or class: one of {', '.join(BUILTIN_CLASSES)}")
    lengths = workload_lengths(spec, base, where, bool(sweep))
    prompt, output = (d if isinstance(d, int) else d.nominal for d in lengths)
    dists = [d if isinstance(d, LengthDist) else None for d in lengths]
    groups = parse_prefix_groups(spec.get("shared_prefix_groups", None), where(("shared_prefix_groups",)))
    if "requests" in spec and "samples" in spec:
        raise ConfigError(f"{where(('requests',))}: requests and samples are the same bound: set one")
    bound_key = "requests" if "requests" in spec else "samples"
    samples = spec.get(bound_key)  # None: the default, chosen below (auto for a closed loop)
    if samples not in (None, "auto"):
        samples = parse_int(samples, where((bound_key,)), 1)
    warmup = parse_int(spec.get("warmup", 2), where(("warmup",)), 0)
    default_system = 0
    if base and base.system_prompt_tokens:  # keep the class's system share when prompt_tokens is overridden
        default_system = round(base.system_prompt_tokens * prompt / base.prompt_tokens)
    system = parse_int(spec.get("system_prompt_tokens", default_system), where(("system_prompt_tokens",)), 0)
    shared = parse_int(spec.get("shared_prefix_tokens", 0), where(("shared_prefix_tokens",)), 0)
    conc = parse_int(spec.get("concurrency", 1), where(("concurrency",)), 1)
    if groups is not None and shared:
        raise ConfigError(f"{where(('shared_prefix_groups',))}: give shared_prefix_groups or shared_prefix_tokens, "
                          f"not both (shared_prefix_tokens is one group shared by every request)")
    for k, v in (("system_prompt_tokens", system), ("shared_prefix_tokens", shared),
                 ("shared_prefix_groups", groups.tokens if groups else 0)):
        shortest = sweep[0] if sweep else prompt
        if v >= shortest:
            what = "the shortest prompt_sweep length" if sweep else "prompt_tokens"
            raise ConfigError(f"{where((k,))}: {k}{'.tokens' if k == 'shared_prefix_groups' else ''} ({v}) must be "
                              f"smaller than {what} ({shortest})")
    rate = spec.get("max_error_rate", 0.0)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
        raise ConfigError(f"{where(('max_error_rate',))}: expected a fraction between 0 and 1, got {rate!r}")
    slo = spec.get("slo", None)
    budgets_spec: dict[str, Any] = {k: (v, "class default") for k, v in (base.budgets.items() if base else ())}
    if slo is not None and not isinstance(slo, Mapping):
        raise ConfigError(f"{where(('slo',))}: expected a mapping of budgets like {{ttft_p95: 500ms}}, "
                          f"got {type(slo).__name__}")
    prefill_slo = {}
    structured = parse_structured(spec[STRUCTURED_KEY], where) if spec.get(STRUCTURED_KEY) is not None else None
    agent_slo = {k: budgets_spec.pop(k) for k in list(budgets_spec) if k in AGENT_BUDGET_KEYS}
    for k, v in (slo or {}).items():  # a class default can be dropped with `key: null`
        if k in AGENT_BUDGET_KEYS:
            agent_slo[k] = (v, where(("slo", k)))
            continue
        if k == OVERHEAD_BUDGET:
            structured = with_overhead(structured, v, where(("slo", k)))
            continue
        if k in PREFILL_SLO_KEYS and k not in PREFILL_ROOFLINE_KEYS:
            if v is not None:
                prefill_slo[k] = (parse_prefill_slo(k, v, where(("slo", k))), where(("slo", k)))
            continue
        budgets_spec[k] = (v, where(("slo", k)))
    by_prompt = {k: budgets_spec.pop(k) for k in list(budgets_spec) if k in BY_PROMPT_KEYS}
    budgets = tuple(parse_budget(k, v, src) for k, (v, src) in budgets_spec.items() if v is not None)
    prompt_budgets = tuple(parse_prompt_budget(k, v, under(where, ("slo", k)))
                           for k, (v, _) in by_prompt.items() if v is not None)
    roof = spec.get("roofline", None)
    if roof is not None and not isinstance(roof, Mapping):
        raise ConfigError(f"{where(('roofline',))}: expected a mapping like {{min_decode_efficiency: 0.5}}")
    for k in PREFILL_ROOFLINE_KEYS:
        if roof is not None and roof.get(k) is not None:
            prefill_slo[k] = (parse_prefill_slo(k, roof[k], where(("roofline", k))), where(("roofline", k)))
    if prefill_slo and not sweep:
        first = next(iter(prefill_slo))
        raise ConfigError(f"{prefill_slo[first][1]}: prefill budgets need a prompt_sweep "
                          "(e.g. prompt_sweep: [256, 1024, 4096]): the fit of TTFT against prompt length")
    cold = spec.get("cold_starts", "exclude")
    if cold not in COLD_STARTS:
        raise ConfigError(f"{where(('cold_starts',))}: expected one of {', '.join(COLD_STARTS)}, got {cold!r}"
                          f"{did_you_mean(cold, COLD_STARTS) if isinstance(cold, str) else ''}")
    rate_sweep = None
    if "rate_sweep" in spec:
        from .rate_sweep import make_sweep

        rate_sweep = make_sweep(spec["rate_sweep"], where(("rate_sweep",)))
        if "rate" in spec or "concurrency" in spec or sweep:
            clash = "rate" if "rate" in spec else "concurrency" if "concurrency" in spec else "prompt_sweep"
            raise ConfigError(f"{where(('rate_sweep',))}: a rate_sweep chooses the rate itself (an open loop): "
                              f"drop {clash}")
        if rate_sweep is not None:
            spec = {**spec, "rate": rate_sweep.rate_min}
    load = make_load(spec, where)
    if load is not None and load.duration_s and "samples" not in spec and "requests" not in spec:
        samples = DURATION_MAX_REQUESTS  # bounded by the duration (and this cap)
    agent = make_agent(klass_name, spec, agent_slo, where, parse_duration_ms)
    # statistical verdicts are the default where samples are independent draws one request (or
    # round) at a time -- the closed loop ``samples: auto`` runs; an open-loop load run, a rate
    # sweep (both: queueing couples the samples), a prompt sweep (judged on its fit) and agent
    # sessions keep the point estimate unless ``confidence`` is set (README "Statistical verdicts")
    closed_loop = load is None and rate_sweep is None and not sweep and agent is None and trace is None \
        and mix is None  # a mix: per-class samples are not fixed in advance
    # an A/B run's verdict is the block-bootstrap comparison of its arms; its own budgets keep the
    # point estimate too (the fixed 20 could never pass a p95 at 95%: README "Deploy gate"); so do a
    # server sweep's arms (each judged on fixed samples, the same number per arm)
    arms = spec.get("baseline_target", None) is not None or spec.get(SERVER_SWEEP, None) is not None
    at_confidence = closed_loop and not arms
    samples_given = samples is not None
    if samples is None:  # auto where it has a budget to decide; an A/B run compares fixed arms
        from ..measure.verdict import holds_up

        decides = any(holds_up(b) for b in budgets) and not arms \
            and not (structured is not None and structured.compares)  # twins: a fixed number of pairs
        samples = "auto" if closed_loop and decides else DEFAULT_FIXED_SAMPLES
    if load is not None and samples == "auto":
        raise ConfigError(f"{where(('samples',))}: samples: auto sends rounds at the workload's concurrency until "
                          f"every budget is decided; it does not combine with rate/duration/ramp_up/rate_sweep -- "
                          f"give requests: N (or samples: N) for a load run")
    w = Workload(name=name, klass=klass_name, prompt_tokens=prompt, output_tokens=output, samples=20,
                 warmup=warmup, system_prompt_tokens=system, shared_prefix_tokens=shared, concurrency=conc,
                 max_error_rate=float(rate), budgets=budgets, roofline=roof, cold_starts=cold,
                 prompt_sweep=sweep, prefill_slo=prefill_slo, load=load, sweep=rate_sweep,
                 agent=agent, confidence=DEFAULT_CONFIDENCE if at_confidence else None, samples_given=samples_given,
                 regression=parse_tolerances(spec.get("regression", None), where(("regression",))) or None,
                 baseline_target=spec.get("baseline_target", None), prompt_dist=dists[0], output_dist=dists[1],
                 shared_prefix_groups=groups, trace=trace, prompt_budgets=prompt_budgets, structured=structured,
                 stall_prompt_tokens=parse_stall_prompt_tokens(spec, where),
                 request=parse_request_keys(spec, None if trace else (dists[1] and dists[1].min) or output, where),
                 mix=mix)
    check_structured(structured, agent=agent is not None, trace=trace is not None, samples=samples, where=where)
    if spec.get(SERVER_SWEEP, None) is not None:
        check_sweep_workload(spec, samples, where)
        w = replace(w, server_sweep=parse_server_sweep(spec[SERVER_SWEEP], where))
    if (w.prompt_dist or w.output_dist or groups) and w.agent is not None:
        key = "shared_prefix_groups" if groups else "prompt_tokens" if w.prompt_dist else "output_tokens"
        raise ConfigError(f"{where((key,))}: agent sessions send one fixed-length transcript per turn; a length "
                          f"distribution or shared_prefix_groups is not supported there -- give an integer")
    if samples == "auto" and (w.prompt_sweep or w.agent is not None):
        raise ConfigError(f"{where(('samples',))}: samples: auto decides percentile budgets one request at a "
                          f"time; a {'prompt_sweep' if w.prompt_sweep else 'agent session'} workload is judged on "
                          f"its {'fit' if w.prompt_sweep else 'sessions'}: give a number of samples")
    if samples == "auto" and w.baseline_target is not None:
        raise ConfigError(f"{where(('samples',))}: samples: auto does not combine with baseline_target: the A/B "
                          f"verdict's bootstrap interval holds its false-alarm rate only for a sample size fixed in "
                          f"advance (looking again after every block and stopping when it looks decided would "
                          f"flag noise more often) -- give samples: N (e.g. samples: 40)")
    if "requests" in spec:  # with_statistics reads samples: from spec
        spec = {k: v for k, v in spec.items() if k != "requests"}
    w = with_statistics(w, spec, where, samples, samples_defaulted=not samples_given)
    check_fraction_budgets(w, where(("slo",)))
    if "workers" in spec and spec.get("ray") is not None:  # with ray, the number of nodes: with_ray judges it
        w = replace(w, workers=parse_workers(spec["workers"], where(("workers",))))
    elif "workers" in spec:
        w = with_workers(w, spec["workers"], where(("workers",)))
    elif spec.get("ray") is None:  # not given: auto for the load engine's loops, else one process
        w = default_workers(w)
    if spec.get("ray") is not None:
        w = with_ray(w, spec["ray"], where(("ray",)), workers_given="workers" in spec)
    return w


def check_fraction_budgets(w: Workload, where: str) -> None:
    """fluidity needs a first-token deadline and a per-token deadline."""
    keys = w.budget_map()
    if "fluidity_min" in keys:
        has = lambda metric: any(b.metric == metric for b in w.budgets)  # noqa: E731
        if not has("ttft") or not (has("tpot") or has("itl")):
            raise ConfigError(f"{where}: fluidity_min needs a TTFT budget (the first token's deadline) and a "
                              f"TPOT or ITL budget (each later token's), e.g. ttft_p95: 500ms, tpot_p95: 50ms")


def _fixed(text: str) -> Callable[[tuple], str]:
    """A ``where`` that names one place whatever the key path."""
    return lambda _path: text


def with_budgets(w: Workload, extra: Mapping[str, Any], where: str) -> Workload:
    """Return ``w`` with budgets from ``extra`` replacing same-key ones (marker > file)."""
    merged = w.budget_map()
    by_prompt = {b.key: b for b in w.prompt_budgets}
    agent = w.agent.budget_map() if w.agent else {}
    for k, v in extra.items():
        if k in AGENT_BUDGET_KEYS:
            if w.agent is None:
                raise ConfigError(f"{where} {k}: an agent-session budget needs a session workload "
                                  f"(steps: K or class: {AGENT_CLASS})")
            from .agent_spec import parse_agent_budget

            agent[k] = parse_agent_budget(k, v, f"{where} {k}", parse_duration_ms)
            continue
        if k == OVERHEAD_BUDGET:
            w = replace(w, structured=with_overhead(w.structured, v, f"{where} {k}"))
            check_structured(w.structured, agent=False, trace=w.trace is not None,
                             samples="auto" if w.sequential else w.samples, where=_fixed(f"{where} {k}"))
            continue
        if k in BY_PROMPT_KEYS:
            by_prompt[k] = parse_prompt_budget(k, v, under(lambda p: f"{where} {'.'.join(map(str, p))}", (k,)))
            continue
        merged[k] = parse_budget(k, v, f"{where} {k}")
    w = replace(w, agent=replace(w.agent, budgets=tuple(agent.values()))) if w.agent else w
    return replace(w, budgets=tuple(merged.values()), prompt_budgets=tuple(by_prompt.values()))
