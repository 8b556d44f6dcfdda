"""Per-chunk token counts: when they are known to be exact."""
from pytest_llm_latency.core.measure.record import RecordBuilder


def _clock(times):
    it = iter(times)
    return lambda: next(it)


def _build(chunks: int, completion_tokens: int | None, running=None):
    b = RecordBuilder(_clock([0]))
    for i in range(chunks):
        b.token_chunk(10 + i, running_completion_tokens=None if running is None else running[i])
    b.usage(8, completion_tokens)
    return b.finish(100)


def test_one_chunk_per_token_without_running_counts_is_exact():
    """llama.cpp and Ollama send no per-chunk counts, but N chunks for N tokens are one token each:
    no 'ITL is per chunk' note (a warning) on every such run."""
    assert _build(4, 4).token_counts_exact


def test_fewer_chunks_than_tokens_without_counts_is_inexact():
    assert not _build(3, 6).token_counts_exact
    assert not _build(3, None).token_counts_exact


def test_running_counts_are_exact():
    assert _build(3, 6, running=[2, 4, 6]).token_counts_exact


def test_no_chunks_is_never_exact():
    assert not _build(0, 0).token_counts_exact
