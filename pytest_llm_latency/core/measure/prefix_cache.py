"""Did the server's prefix cache serve the measured prompts?  Pure decision logic
(docs/concepts.md#prefix-caches-cant-fake-a-pass).

Every prompt is salted, so a server that reports hits beyond ``CacheEvidence.allowance`` skipped the
prefill of prompts it cannot have seen (a nonce pinned to replay an earlier run, another client
sending the same prompts): TTFT, TTFO, E2E and output tok/s are then not judged.  Evidence, most
precise first: llama.cpp's per-response ``timings.cache_n`` (or Ollama's final object without
``prompt_eval_count``), ``/metrics`` counter deltas over the samples (``COUNTERS``), SGLang's
``sglang:cache_hit_rate`` gauge (recent batches; approximate).
"""
from __future__ import annotations

from dataclasses import dataclass

# Tokens per request that a server may always find cached, whatever the salt:
# BOS plus a chat template's fixed head before the first user character (Llama 3.1's
# default system header "Cutting Knowledge Date: ... Today Date: ..." is ~25 tokens;
# ChatML heads are ~5-20), which vLLM hits as one or two whole 16-token blocks and
# llama.cpp as a common token prefix with the previous prompt.  Two blocks: 32.
ALWAYS_CACHED_PER_REQUEST = 32
# Beyond that head, a share of the prompt that may be cached by chance (a salt word
# equal to the previous prompt's, llama.cpp's byte-level common prefix).  At most this
# share of the prefill was skipped, so TTFT is at most ~5% faster than uncached: within
# run-to-run noise.  A cache that fakes a pass serves nearly all of it (3066 of 3072
# tokens in the reproduction of issue 9).
MAX_CHANCE_SHARE = 0.05

# Counters over the samples can include other clients' requests.  When the server saw
# more prompt tokens than we sent (beyond this slack for a template head), the hits
# cannot be attributed to our prompts: a note, not an error.
FOREIGN_TRAFFIC_SLACK = 1.10

# The prefix cache's block in tokens: vLLM's default (and the reference target's), SGLang's
# radix tree and llama.cpp match per token, so rounding a declared shared prefix down to 16
# only makes the expected hits stricter by < 16 tokens a request, which the template allowance covers.
CACHE_BLOCK_TOKENS = 16

# (cached-tokens counter in a /metrics delta, counters whose sum is every prompt token the
# server saw); first present wins
COUNTERS = (
    ("vllm:prefix_cache_hits_total", ("vllm:prefix_cache_queries_total",)),
    ("vllm:gpu_prefix_cache_hits_total", ("vllm:gpu_prefix_cache_queries_total",)),
    ("llamacpp:prompt_tokens_cached_total", ("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total")),
    ("sglang:cached_tokens_total", ("sglang:prompt_tokens_total",)),
)
SGLANG_HIT_RATE = "sglang:cache_hit_rate"


@dataclass(frozen=True)
class CacheEvidence:
    cached_tokens: int     # prompt tokens the server says it served from its prefix cache
    prompt_tokens: int     # prompt tokens of the measured requests
    requests: int
    source: str
    seen_tokens: int | None = None  # every prompt token the server saw meanwhile (counters), if known

    @property
    def share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def foreign_traffic(self) -> bool:
        """The server processed clearly more prompt tokens than ours: other clients share it."""
        return self.seen_tokens is not None and self.seen_tokens > FOREIGN_TRAFFIC_SLACK * self.prompt_tokens + \
            ALWAYS_CACHED_PER_REQUEST * self.requests

    @property
    def allowance(self) -> int:
        """Cached tokens a salted, uncached run may still show (template head + chance)."""
        return int(ALWAYS_CACHED_PER_REQUEST * self.requests + MAX_CHANCE_SHARE * self.prompt_tokens)


def evidence(metrics_delta: dict[str, float] | None, per_request_cached: list[int | None],
             prompt_tokens: list[int], source: str = "llama.cpp timings.cache_n of each response"
             ) -> CacheEvidence | None:
    """What the server reports, or ``None`` when it reports nothing about its cache.

    ``per_request_cached``: ``timings.cache_n`` of each measured request (None where absent);
    ``prompt_tokens``: each measured request's prompt length (usage)."""
    total, n = sum(prompt_tokens), len(prompt_tokens)
    if not n:
        return None
    cached = [c for c in per_request_cached if isinstance(c, int)] if per_request_cached else []
    if per_request_cached and len(cached) == len(per_request_cached):
        return CacheEvidence(sum(cached), total, n, source)
    delta = metrics_delta or {}
    for name, seen in COUNTERS:
        if name in delta:
            seen_tokens = int(round(sum(delta[s] for s in seen))) if all(s in delta for s in seen) else None
            return CacheEvidence(int(round(delta[name])), total, n, f"{name} in /metrics", seen_tokens)
    rate = delta.get(SGLANG_HIT_RATE)
    if rate is not None and 0.0 <= rate <= 1.0:
        return CacheEvidence(int(round(rate * total)), total, n,
                             f"{SGLANG_HIT_RATE} {rate:.2f} in /metrics (recent batches, approximate)")
    return None


@dataclass(frozen=True)
class CacheVerdict:
    note: str | None = None    # for the result's notes
    error: str | None = None   # the cache-sensitive budgets cannot be judged


def expected_shared(group_tokens: int, requests: int) -> int:
    """Cached tokens that ``shared_prefix_groups`` declares (issue 27): each request's group prefix of
    ``group_tokens`` tokens, rounded down to the cache block, may be served from the cache (the
    template head is in ``CacheEvidence.allowance``).  An upper bound: a group's first request,
    or one sent while its group's first was still in flight, may miss."""
    return requests * (group_tokens // CACHE_BLOCK_TOKENS) * CACHE_BLOCK_TOKENS


def declared(ev: CacheEvidence, group_tokens: int | None, bound_tokens: int | None) -> tuple[int, str]:
    """(cached tokens the workload declares for ``ev``'s requests, who declares them): a trace replay's
    bound (``bound_tokens``: the blocks its rows share), else ``shared_prefix_groups`` of
    ``group_tokens`` each (``expected_shared``), else none."""
    if bound_tokens is not None:
        return bound_tokens, "the trace's shared hash_ids declare"
    return (expected_shared(group_tokens, ev.requests) if group_tokens is not None else 0,
            "shared_prefix_groups declares")


def decide(ev: CacheEvidence | None, *, shared_prefix_tokens: int = 0, expected_tokens: int = 0,
          declared_by: str = "shared_prefix_groups declares") -> CacheVerdict:
    """A note whenever the cache served more than a salted prompt can explain, and an error
    (the result is not judged) unless the workload asks for a shared prefix: ``shared_prefix_tokens``
    (any hits), or ``shared_prefix_groups`` whose ``expected_tokens`` (``expected_shared``) are
    expected hits -- beyond them (and the allowance) the sample is unjudgeable as without groups."""
    if ev is None or ev.cached_tokens <= 0:
        return CacheVerdict()
    what = f"{ev.cached_tokens} of {ev.prompt_tokens} prompt tokens ({ev.share:.0%}) of the {ev.requests} " \
           f"measured requests were served from the server's prefix cache ({ev.source})"
    if shared_prefix_tokens:
        return CacheVerdict(note=f"prefix cache: {what}; the workload shares a {shared_prefix_tokens}-token prefix")
    if expected_tokens and ev.cached_tokens <= ev.allowance + expected_tokens:
        whose = "each request's group prefix" if declared_by.startswith("shared_prefix_groups") else \
            "each row's leading blocks shared with a row sent before it, and a session turn's history"
        return CacheVerdict(note=f"prefix cache: {what}; expected: {declared_by} up to "
                                 f"{expected_tokens} cached tokens ({whose}, in whole "
                                 f"{CACHE_BLOCK_TOKENS}-token blocks)")
    if ev.cached_tokens <= ev.allowance + expected_tokens:
        return CacheVerdict()
    if ev.foreign_traffic:
        return CacheVerdict(note=f"prefix cache: the server served {ev.cached_tokens} prompt tokens from its prefix "
                                 f"cache during the samples ({ev.source}), but it processed {ev.seen_tokens} prompt "
                                 f"tokens against the {ev.prompt_tokens} sent here: other clients share the server, "
                                 f"so the hits cannot be attributed to these prompts")
    return CacheVerdict(
        note=f"prefix cache: {what}, although every prompt is salted",
        error=f"not judged: {ev.cached_tokens} of {ev.prompt_tokens} prompt tokens were served from the server's "
              f"prefix cache ({ev.source}; a salted run may show at most {ev.allowance}"
              f"{f' plus the {expected_tokens} that {declared_by}' if expected_tokens else ''}), "
              f"so TTFT, TTFO, E2E and "
              f"output tok/s skip the prefill and look faster than the server is -- was the nonce pinned "
              f"(--llm-latency-nonce) to replay a run against the same server, or is another client sending "
              f"the same prompts? Run with a fresh nonce")
