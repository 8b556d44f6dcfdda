"""Exact ITL's tokenize rule against a real llama-server's ``/tokenize`` (the integration tier).

llama-server streams one token per event.  Its real stream is regrouped 4 events to a chunk (as
a server with ``--stream-interval 4`` or a proxy would send it, stamped at the 4th), then the
chunks' texts are counted by the same server's ``/tokenize`` (without special tokens): the rule
must give back 4 tokens a chunk, or, where the tokenizer counts the pieces otherwise than the
whole, fall back to apportioning and say why -- never keep counts that do not sum to N.

Found on this server (llama.cpp b1-0c1e570, the generated SentencePiece vocabulary): each call
adds one token (the dummy prefix), so 8 chunks counted apart sum to N + 8; that constant is taken
off every chunk and the counts are exact."""
from dataclasses import replace

import pytest

from pytest_llm_latency.client.prepare.chunk_counts import CountRecovery
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.core.measure import metrics as m
from pytest_llm_latency.core.spec.workload import make_workload

pytestmark = pytest.mark.integration


def test_regrouped_llama_stream_is_recounted_by_its_tokenize_endpoint(llama_tiny):
    with make_http_client() as http:
        client = OpenAIClient(http, llama_tiny.url, "tiny", continuous_usage=False)
        rec = client.stream("", "Recount me: the quick brown fox", 32)
        assert rec.token_count_rule == "one each" and rec.completion_tokens == 32 == len(rec.chunks)
        truth = m.itl_ms(rec)
        groups = [rec.chunks[i:i + 4] for i in range(0, 32, 4)]
        rec.chunks = [replace(g[-1], tokens=1, text="".join(c.text for c in g)) for g in groups]
        rec.token_count_rule = None
        recovery = CountRecovery(client, make_workload("w", {"prompt_tokens": 8, "output_tokens": 32}))
        recovery.apply([rec])
        extra, notes, _ = recovery.report([rec])
    counts = [c.tokens for c in rec.chunks]
    print(f"llama-server /tokenize on 4-token chunks: rule {extra}, counts {counts}, notes {notes}")
    assert sum(counts) == 32
    assert extra == {"itl_token_counts": "tokenize"} and notes == [] and counts == [4] * 8
    # each regrouped chunk's gap spread over its 4 tokens: the mean of the 4 true per-token gaps
    assert m.itl_ms(rec) == pytest.approx([sum(truth[i:i + 4]) / 4 for i in range(3, 31, 4) for _ in range(4)])
