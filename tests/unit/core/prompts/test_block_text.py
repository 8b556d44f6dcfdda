"""Block texts whose token counts add up (issue 27, ``core.prompts.block_text``), on simulated counters
reproducing each recorded tokenizer (``tests/unit/recordings/tokenize-*.json``: copies of
``shared/recordings``) and the reference target's own: 200 random trace rows each give exactly
their input length, shared leading ids share text byte for byte, two nonces share nothing,
calibration costs a constant number of calls, and a non-additive tokenizer is refused."""
from __future__ import annotations

import json
import os
import random
import re

import pytest

from pytest_llm_latency.core.prompts.block_text import (CALIBRATION_CALLS, PALETTE, Palette, RowTail,
    UnreachableLength, calibrate, prompt_text, row_blocks)
from pytest_llm_latency.core.errors import MeasurementError
from pytest_llm_latency.targets.reference import tokenizer as reference
from tests.helpers.counting import counting
from tests.helpers.paths import RECORDINGS


# common English words, each one token (with and without its leading space), as in GPT-2 / Llama vocabularies
COMMON = ("a he you world please token hello " + " ".join(w for fam in PALETTE for w in fam) + " there which their "
          "said each about how them she many these would other like him see could make first its who now people "
          "made did down way find use water long little very after words called just where most know get").split()


def bpe_pieces(text: str, vocab: frozenset[str]) -> list[str]:
    """A BPE-like tokenizer: GPT-2-style pre-tokenization (split before a space, letters, digits and
    punctuation apart), then each pre-token whole if in ``vocab``, else greedy longest vocabulary
    prefixes falling back to single characters."""
    out = []
    for pre in re.findall(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+", text):
        while pre:
            n = next(n for n in range(len(pre), 0, -1) if n == 1 or pre[:n] in vocab)
            out.append(pre[:n])
            pre = pre[n:]
    return out


BPE_VOCAB = frozenset([w for w in COMMON] + [" " + w for w in COMMON] + ["Hello", " Token", "ize"])


def bpe(text: str) -> int:
    return 1 + len(bpe_pieces(text, BPE_VOCAB))  # + BOS


def byte_level(text: str) -> int:
    return 1 + len(text.encode())  # vLLM's test model: 1 token = 1 byte, + BOS


def spm_chars(text: str) -> int:
    # make_models.py: BOS, the dummy-prefix '▁', then one token per character (a space is '▁')
    return len(["<s>", "▁"] + ["▁" if c == " " else c for c in text])


COUNTERS = {"reference": reference.count, "byte-level (vLLM)": byte_level,
            "SPM chars (llama.cpp test models)": spm_chars, "BPE (llama.cpp recording)": bpe,
            "chat template +7": lambda t: reference.count(t) + 7}


def test_the_simulated_counters_reproduce_the_recorded_tokenizers():
    vllm = json.loads((RECORDINGS / "tokenize-vllm.json").read_text())
    text = vllm["request"]["prompt"]
    assert byte_level(text) - 1 == vllm["response"]["count"] == len(vllm["response"]["tokens"])
    llama = json.loads((RECORDINGS / "tokenize-llamacpp.json").read_text())
    assert bpe_pieces(llama["request"]["content"], BPE_VOCAB) == [t["piece"] for t in llama["response"]["tokens"]]


def trace(rng: random.Random, n: int, block: int) -> list[tuple[tuple, int, int]]:
    """``n`` rows (hash_ids, input_length, key) with shared prefixes as real traces have: a few root
    chains, each row taking a leading part of one and adding its own ids, some with fewer ids
    than blocks (a tail of the row's own), partial last blocks, string ids for half the roots."""
    roots = []
    for r in range(12):
        ids = [f"r{r}-{i}" if r % 2 else r * 1000 + i for i in range(6)]
        roots.append(ids)
    rows = []
    for key in range(n):
        root = rng.choice(roots)
        shared = rng.randint(1, len(root))
        blocks = shared + rng.randint(0, 3)
        length = (blocks - 1) * block + rng.randint(8 if blocks == 1 else 1, block)
        own = [f"own-{key}-{i}" for i in range(blocks - shared)]
        ids = tuple(root[:shared] + own)[:blocks - (1 if rng.random() < 0.2 and blocks > shared else 0)]
        rows.append((ids, length, key))
    return rows


@pytest.mark.parametrize("name", sorted(COUNTERS))
@pytest.mark.parametrize("block", [512, 16])
def test_every_row_gets_exactly_its_input_length_and_shares_its_declared_blocks(name, block):
    count, calls = counting(COUNTERS[name])
    palette = calibrate(count, nonce="run-a")
    assert len(calls) == CALIBRATION_CALLS  # the same for every tokenizer
    rows = trace(random.Random(f"{name}|{block}"), 200, block)
    cache: dict = {}
    texts = {}
    for ids, length, key in rows:
        blocks = row_blocks(ids, length, block, key)
        text, planned = prompt_text(palette, "run-a", blocks, opens_prompt=True, cache=cache)
        assert planned == length and COUNTERS[name](text) == length, (ids, length)
        texts[key] = (blocks, text)
    assert len(calls) == CALIBRATION_CALLS  # building texts never counts
    pairs = 0
    last: dict = {}  # each row against the previous one opening with the same id
    for bb, tb in texts.values():
        ba, ta = last.get(bb[0][0], (bb, tb))
        last[bb[0][0]] = (bb, tb)
        j = 0
        while j < min(len(ba), len(bb)) - 1 and ba[j] == bb[j]:  # leading blocks declared equal (id and length)
            j += 1
        if j and min(ba[-1][1], bb[-1][1]) <= palette.head:
            j -= 1  # a last block shorter than the head: the head takes the end of the block before it too
        if j:
            pairs += 1
            # the shared blocks as they stand inside a longer prompt: whole (the head comes off the last
            # blocks, core.prompts.block_text.head_from_the_end), so with a tail block after them to take it
            tail = [("tail", palette.head + 1)]
            whole, _ = prompt_text(palette, "run-a", list(ba[:j]) + tail, opens_prompt=True)
            prefix = whole[:len(whole) - len(prompt_text(palette, "run-a", [("tail", 1)], opens_prompt=False)[0])]
            assert ta.startswith(prefix) and tb.startswith(prefix)  # byte for byte
            assert prefix
            if ba[j][0] != bb[j][0] and min(ba[j][1], bb[j][1]) >= 8:  # another id next: another text
                assert ta[len(prefix):len(prefix) + 24] != tb[len(prefix):len(prefix) + 24]
    assert pairs > 100
    other = calibrate(COUNTERS[name], nonce="run-b")
    for blocks, text in texts.values():
        text_b, planned = prompt_text(other, "run-b", blocks, opens_prompt=True)
        assert planned == sum(n for _, n in blocks) and text_b != text
        assert len(os.path.commonprefix([text, text_b])) < 16  # a chance word or two at most


def test_tails_beyond_the_named_ids_are_the_rows_own():
    palette = calibrate(reference.count)
    a = row_blocks((1, 2), 1500, 512, key=7)
    b = row_blocks((1, 2), 1500, 512, key=8)
    assert a[2] == (RowTail(7), 476) and b[2] == (RowTail(8), 476)
    ta, _ = prompt_text(palette, "n", a, opens_prompt=True)
    tb, _ = prompt_text(palette, "n", b, opens_prompt=True)
    shared, _ = prompt_text(palette, "n", a[:2], opens_prompt=True)
    assert ta.startswith(shared) and tb.startswith(shared) and ta[len(shared):] != tb[len(shared):]
    with pytest.raises(ValueError, match="row 7: 3 hash_ids but input_length 600 makes 2 block"):
        row_blocks((1, 2, 3), 600, 512, key=7)


@pytest.mark.parametrize("name", sorted(COUNTERS))
def test_a_shorter_block_of_the_same_id_is_the_longer_ones_prefix_but_for_its_last_pieces(name):
    palette = calibrate(COUNTERS[name])
    long, _ = prompt_text(palette, "n", [(42, 512)], opens_prompt=False)
    for n in (500, 300, 100, 17):
        short, planned = prompt_text(palette, "n", [(42, n)], opens_prompt=False)
        assert planned == n
        assert COUNTERS[name]("x" + short) - COUNTERS[name]("x") == n
        assert len(os.path.commonprefix([long, short])) >= len(short) - 24


@pytest.mark.parametrize("name", sorted(COUNTERS))
def test_a_later_turn_adds_exactly_its_length_after_any_history(name):
    count = COUNTERS[name]
    palette = calibrate(count)
    history = "Hello world! Tokenize this, please: 12345. The answer was"
    for n in (1, 2, 3, 40, 700):
        text, planned = prompt_text(palette, "n", row_blocks(("t",), n, 512, key=1), opens_prompt=False)
        assert planned == n and count(history + text) - count(history) == n


def test_a_byte_level_length_no_piece_reaches_uses_the_glue_and_an_unreachable_one_is_reported():
    palette = calibrate(byte_level)
    assert palette.costs == (2, 3, 4, 5) and palette.glue == 1 and palette.head == 0  # BOS, less the dropped space
    one, planned = prompt_text(palette, "n", [(5, 1)], opens_prompt=False)
    assert one == "q" and planned == 1 and byte_level("ab" + one) - byte_level("ab") == 1
    text, planned = prompt_text(palette, "n", [(5, 1)], opens_prompt=True)  # a 1-token prompt: BOS alone
    assert planned == 2 == byte_level(text)  # the nearest, and the plan says so: the caller records it
    far = Palette(costs=(200, 201, 202, 203), head=0, glue=0)  # no text within 128 tokens of 1
    with pytest.raises(UnreachableLength, match=r"no text of pieces within 128 tokens of 1 \(additive pieces of 200/"):
        prompt_text(far, "n", [(5, 1)], opens_prompt=True)


def test_word_level_tokenizers_never_need_the_glue():
    palette = calibrate(reference.count)
    assert palette.costs == (1, 1, 1, 1) and palette.glue == 0 and palette.head == 0
    assert calibrate(COUNTERS["chat template +7"]).head == 7


@pytest.mark.parametrize("count, behaviour", [
    (lambda t: -(-len(t) // 3), "the 1 words of 1 letter"),  # the reference's chars3 rule: 3 characters a token
    (lambda t: 1 + len(bpe_pieces(t, BPE_VOCAB - {" with"})), "words of 4 letter"),  # " with" is 2 tokens
    (lambda t: reference.count(t) + (1 if t[:4] in {"that", "with", "from", "this"} else 0), "the head depends on"),
])
def test_a_non_additive_tokenizer_is_refused_naming_the_behaviour(count, behaviour):
    with pytest.raises(MeasurementError) as exc:
        calibrate(count)
    assert exc.value.kind == "tokenize"
    assert behaviour in exc.value.message and "not additive on space-led word pieces" in exc.value.message
