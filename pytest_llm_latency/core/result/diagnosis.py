"""Why a budget failed: the seed article's "what to change when the numbers are bad", run as
rules over what the run measured (client side) and what the server said (``/metrics``).

Pure: ``diagnose(Evidence, failing_metrics) -> [Cause]``.  Each rule needs its evidence; a rule
whose evidence is missing stays silent (never a guess).  A cause names the metrics it can
explain, and is only given for a failing one of them (``ANY``: for every failure).
"""
from __future__ import annotations

from dataclasses import dataclass, field

ANY = frozenset({"ttft", "ttfo", "tpot", "itl", "e2e", "output_tps", "goodput", "fluidity", "itl_stall"})
FIRST_TOKEN = frozenset({"ttft", "ttfo", "e2e", "goodput", "fluidity"})
DECODE = frozenset({"tpot", "itl", "e2e", "output_tps", "goodput", "fluidity"})
#: what a stream's pauses explain: decode, and the stall budgets (core.checks.stalls)
PAUSES = DECODE | {"itl_stall"}

#: thresholds, named so each rule reads as its sentence
BULK = 0.5              # "the bulk of": at least half
HIT_RATE_NEAR_ZERO = 0.05
KV_NEAR_FULL = 0.9     # a new sequence needs whole free blocks: 90 % used is full in practice
ITL_TAIL_RATIO = 3.0    # ITL p99 / p50
CONTEXT_SLOWDOWN = 1.2  # late-output ITL / early-output ITL
NETWORK_GAP_MS = 50.0   # client TTFT beyond the server's, with an idle queue
FEW_TOKENS_PER_STEP = 1.5  # a speculating server whose steps emit fewer: its drafts are mostly rejected
STALL_CONCENTRATION = 2.0  # stall gaps' p99 / clean gaps' p99: the long gaps are the long prefills'
STALL_GAPS_TO_CLEAR = 20   # stall gaps it takes to say the long gaps are *not* the prefills'
CHUNKED_WINDOW_SHARE = 0.5  # stall gaps' p99 under half the prefill window: the prefill ran as several steps


@dataclass(frozen=True)
class Evidence:
    """Figures from one run; None where not measured.  Times in ms."""
    ttft_p50: float | None = None
    #: the client's mean TTFT: the whole the server's mean queue and prefill times are parts of (a p50 is
    #: no such whole: a mix's or a skewed run's means sit far above its median)
    ttft_mean: float | None = None
    itl_p50: float | None = None
    itl_p99: float | None = None
    concurrency: int = 1
    open_loop: bool = False
    prompt_tokens: int | None = None
    shared_prefix_tokens: int = 0
    # client health (client/load/engine.py)
    client_lag_p99: float | None = None
    client_fell_behind: bool = False
    # TTFT against prompt length (requests of different prompt lengths), and ITL early vs late in the output
    ttft_by_prompt: tuple[tuple[int, float], ...] = ()
    itl_early: float | None = None
    itl_late: float | None = None
    # the server's view (core/server_model.ServerView)
    server: dict = field(default_factory=dict)
    # speculative decoding (core.measure.spec_decode: res.spec_decode) and the roofline's per-step figure
    tokens_per_step: float | None = None
    acceptance_rate: float | None = None
    spec_source: str | None = None
    spec_scope: str | None = None
    step_ms: float | None = None
    step_efficiency: float | None = None
    # the gaps that overlapped another request's long prefill vs the others (core.measure.prefill_overlap:
    # res.stall), the long prefills and their main cause ("62% of them during long_summarization's prefills")
    stall_p99: float | None = None
    stall_p50: float | None = None
    clean_p99: float | None = None
    clean_p50: float | None = None
    stall_gaps: int = 0
    stall_prompt_tokens: int | None = None
    long_prompt_tokens: float | None = None
    long_window_ms: float | None = None
    stall_cause: str | None = None

    def s(self, key: str):
        v = self.server.get(key)
        return v if isinstance(v, (int, float)) else None


@dataclass(frozen=True)
class Cause:
    name: str
    text: str
    explains: frozenset = ANY

    @property
    def line(self) -> str:
        return f"cause: {self.name} — {self.text}"


def _client_starved(e: Evidence):
    if e.client_fell_behind:
        return Cause("client starved", f"the client fell behind (CPU-starved: lag p99 {e.client_lag_p99:.0f} ms); "
                                       f"these figures are not the server's")


def _ttft_whole(e: Evidence) -> tuple[float | None, str]:
    """The TTFT a server's mean time is a part of: the client's mean, else (not measured) its p50."""
    return (e.ttft_mean, "mean TTFT") if e.ttft_mean else (e.ttft_p50, "TTFT p50")


def _queueing(e: Evidence):
    waiting, queue = e.s("server_waiting_max"), e.s("server_queue_ms_mean")
    running = e.s("server_running_max")
    limit = f", running max {running:.0f}: max_num_seqs?" if running is not None else ", max_num_seqs?"
    ttft, label = _ttft_whole(e)
    if queue is not None and ttft and queue >= BULK * ttft:
        return Cause("queueing, not the model", f"{queue:.0f} ms of the {ttft:.0f} ms {label} was spent "
                     f"in the server's queue (max waiting {waiting or 0:.0f}{limit})", FIRST_TOKEN)
    if waiting is not None and waiting > 0:
        spent = f"; {queue:.0f} ms mean queue time" if queue is not None else ""
        return Cause("queueing", f"up to {waiting:.0f} requests waited in the server's queue{spent} "
                     f"(running max {running or 0:.0f}: the server's batch limit, max_num_seqs?)", FIRST_TOKEN)


def _prefill_bound(e: Evidence):
    prefill = e.s("server_prefill_ms_mean")
    ttft, label = _ttft_whole(e)
    if prefill is not None and ttft and prefill >= BULK * ttft:
        return Cause("prefill-bound TTFT", f"the server's prefill took {prefill:.0f} ms of the {ttft:.0f} ms "
                     f"{label} ({e.prompt_tokens} prompt tokens): shorter prompts, a shared prefix with "
                     f"prefix caching, or more compute", FIRST_TOKEN)
    pts = sorted(e.ttft_by_prompt)
    if len(pts) >= 4 and pts[-1][0] >= 2 * pts[0][0]:
        half = len(pts) // 2
        short = sorted(t for _, t in pts[:half])[half // 2]
        long_ = sorted(t for _, t in pts[half:])[(len(pts) - half) // 2]
        if long_ >= 1.5 * short:
            return Cause("prefill-bound TTFT", f"TTFT grows with prompt length: median {short:.0f} ms for the "
                         f"shorter prompts, {long_:.0f} ms for the longer ones ({pts[0][0]}..{pts[-1][0]} tokens)",
                         FIRST_TOKEN)


def _prefix_cache(e: Evidence):
    hit, queries = e.s("server_prefix_hit_rate"), e.s("server_prefix_queries")
    if not e.shared_prefix_tokens:
        return None
    share = e.shared_prefix_tokens / e.prompt_tokens if e.prompt_tokens else None
    could = f" (up to {share:.0%} could hit)" if share else ""
    if queries == 0:
        seen = "no prefix-cache lookups at all"
    elif hit is not None and hit < HIT_RATE_NEAR_ZERO:
        seen = f"hit rate {hit:.1%}"
    else:
        return None
    return Cause("prefix cache not effective", f"{seen} on a workload sharing {e.shared_prefix_tokens} prefix "
                 f"tokens{could}: is prefix caching enabled (vLLM --enable-prefix-caching, SGLang radix cache)?",
                 FIRST_TOKEN)


def _decode_context(e: Evidence):
    if e.itl_early and e.itl_late and e.itl_late >= CONTEXT_SLOWDOWN * e.itl_early:
        return Cause("decode slowing with context", f"ITL rose from {e.itl_early:.1f} ms (first quarter of the "
                     f"output) to {e.itl_late:.1f} ms (last quarter): each step reads the whole KV cache, which "
                     f"grows with context", DECODE)


def _stall_decides(e: Evidence) -> bool:
    """The stall split has the evidence to say whether the long gaps are the long prefills' (``_prefill_stall``)."""
    if e.stall_p99 is None or e.clean_p99 is None:
        return False
    return e.stall_p99 >= STALL_CONCENTRATION * e.clean_p99 or e.stall_gaps >= STALL_GAPS_TO_CLEAR


def typical_text(e: Evidence) -> str:
    """``, p50 20.9 ms vs 7.6 ms``: the typical gaps, where the tails alone do not show the concentration."""
    if e.stall_p50 is None or not e.clean_p50 or e.stall_p99 is None \
            or e.stall_p99 >= STALL_CONCENTRATION * (e.clean_p99 or 0.0):
        return ""
    return f", p50 {e.stall_p50:.1f} ms vs {e.clean_p50:.1f} ms"


def _prefill_stall(e: Evidence):
    """Long gaps inside other requests' long prefills: chunked prefill and its token budget per step; long
    gaps everywhere alike: batching or queueing, not the prefills."""
    if not _stall_decides(e) or e.stall_p99 is None or e.clean_p99 is None:
        return None
    during = (f"gaps overlapping another request's prefill of >= {e.stall_prompt_tokens} prompt tokens: p99 "
              f"{e.stall_p99:.1f} ms ({e.stall_gaps} gaps) vs {e.clean_p99:.1f} ms otherwise")
    # the long gaps are the prefills': the tail well above the clean tail, or the typical stall gap well above
    # the typical clean one (a clean tail can hold other prompts' prefill steps: a mix's short prompts)
    typical = e.stall_p50 is not None and e.clean_p50 and e.stall_p50 >= STALL_CONCENTRATION * e.clean_p50
    if e.stall_p99 >= STALL_CONCENTRATION * e.clean_p99 or typical:
        cause = f"; {e.stall_cause}" if e.stall_cause else ""
        known = e.long_prompt_tokens is not None and e.long_window_ms is not None
        window = (f" (the long prefills: median {e.long_prompt_tokens:.0f} tokens, {e.long_window_ms:.0f} ms from "
                  f"send to first token{cause})" if known else "")
        if known and e.long_window_ms and e.stall_p99 < CHUNKED_WINDOW_SHARE * e.long_window_ms:
            return Cause("long prefills stall decode", f"{during}{typical_text(e)}{window}: the prefills ran as "
                         f"several steps (a stall gap is a fraction of the window: chunked), and every step that "
                         f"carries a chunk pauses the running streams -- a smaller token budget per step shortens "
                         f"the pause, at the cost of more steps per prompt (TTFT): vLLM --max-num-batched-tokens "
                         f"(around 2048 favours ITL, higher favours TTFT), SGLang --chunked-prefill-size, llama.cpp "
                         f"-ub (its physical batch)", PAUSES)
        return Cause("long prefills stall decode", f"{during}{typical_text(e)}{window}: an unchunked prefill is one "
                     f"engine step every running stream waits for -- chunk it into the decode batches with a token "
                     f"budget per step: vLLM --enable-chunked-prefill with --max-num-batched-tokens (around 2048 "
                     f"favours ITL, higher favours TTFT), SGLang --chunked-prefill-size, llama.cpp -b / -ub (its "
                     f"logical / physical batch)", PAUSES)
    tail = max(e.stall_p99, e.clean_p99)
    if not e.clean_p50 or tail < ITL_TAIL_RATIO * e.clean_p50:
        return None  # no tail to explain
    running, waiting = e.s("server_running_max"), e.s("server_waiting_max")
    mean = e.s("server_running_mean")
    why = []
    if running is not None:
        avg = f", mean {mean:.1f}" if mean is not None else ""
        why.append(f"the decode step grows with the batch (running max {running:.0f}{avg}): fewer sequences at "
                   f"once (max_num_seqs) or a faster decode")
    if waiting:
        why.append(f"requests queue behind one another (up to {waiting:.0f} waiting)")
    if not why:
        why = ["the decode step grows with the batch, or requests queue behind one another (the server's /metrics "
               "running and waiting gauges would tell which)"]
    return Cause("batching or queueing, not prefill stalls", f"{during}, against {e.clean_p50:.1f} ms p50: the long "
                 f"gaps are not the long prefills' -- {'; '.join(why)}", PAUSES)


def _batching_tail(e: Evidence):
    if _stall_decides(e):
        return None  # the stall split says which (_prefill_stall)
    if (e.concurrency > 1 or e.open_loop) and e.itl_p50 and e.itl_p99 and e.itl_p99 >= ITL_TAIL_RATIO * e.itl_p50:
        load = "under an open-loop load" if e.open_loop else f"at concurrency {e.concurrency}"
        return Cause("batching tail", f"ITL p99 {e.itl_p99:.1f} ms is {e.itl_p99 / e.itl_p50:.1f}x its p50 "
                     f"{e.itl_p50:.1f} ms {load}: other requests' prefills interleave with the decode steps "
                     f"(chunked prefill with a smaller token budget per step smooths it)", DECODE)


def _kv_pressure(e: Evidence):
    pre, kv = e.s("server_preemptions"), e.s("server_kv_usage_max")
    if pre:
        return Cause("preemption / KV pressure", f"{pre:.0f} requests were preempted (KV usage max "
                     f"{(kv or 0):.0%}): more KV memory, fewer concurrent sequences, or shorter contexts")
    if kv is not None and kv >= KV_NEAR_FULL:
        return Cause("KV pressure", f"the KV cache was {kv:.0%} full: new requests wait for memory")


def _network_client(e: Evidence):
    server_ttft, waiting = e.s("server_ttft_ms_p50"), e.s("server_waiting_max")
    if e.client_fell_behind or server_ttft is None or e.ttft_p50 is None or waiting:
        return None
    gap = e.ttft_p50 - server_ttft
    if gap >= max(NETWORK_GAP_MS, server_ttft):
        return Cause("network or client", f"client TTFT p50 {e.ttft_p50:.0f} ms vs the server's own "
                     f"{server_ttft:.0f} ms with an idle queue: {gap:.0f} ms are spent outside the server "
                     f"(network, proxy, TLS, client)", FIRST_TOKEN)


def _acceptance(e: Evidence):
    """A speculating server: TPOT = step time ÷ tokens per step, so name both factors."""
    if e.tokens_per_step is None or e.tokens_per_step >= FEW_TOKENS_PER_STEP:
        return None  # steps that emit several tokens: the acceptance is not what made decode slow
    rate = f" (acceptance {e.acceptance_rate:.0%})" if e.acceptance_rate is not None else ""
    per = {"per request": "over the run's requests", "window": "the server's windowed estimate"}.get(
        e.spec_scope or "", "run totals")
    emitted = "each engine step emitted few tokens"
    if e.step_efficiency is not None:
        steps = f"the steps themselves ran at {e.step_efficiency:.2f} of the ceiling"
    elif e.step_ms is not None:
        steps = f"the steps themselves took {e.step_ms:.3g} ms each (no roofline gate to compare them with)"
    else:
        steps = "the step time is unknown"
    return Cause("speculative decoding acceptance", f"tokens per step {e.tokens_per_step:.2f}{rate}: {emitted}; "
                 f"{steps} ({e.spec_source}, {per}; TPOT = step time ÷ tokens per step)", DECODE)


RULES = (_client_starved, _acceptance, _queueing, _prefill_bound, _prefix_cache, _decode_context, _prefill_stall,
         _batching_tail, _kv_pressure, _network_client)


def diagnose(e: Evidence, failing: set[str] | frozenset = ANY) -> list[Cause]:
    """The causes that fire and explain a failing metric, most fundamental first."""
    return [c for rule in RULES if (c := rule(e)) is not None and c.explains & set(failing)]
