"""Mixed workloads (issue 37): the ``mix:`` spec, its refusals, and which request is which class."""
from __future__ import annotations

from collections import Counter

import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.lengths import LengthDist
from pytest_llm_latency.core.spec.mix_spec import class_counts, class_sequence, window
from pytest_llm_latency.core.spec.workload import make_workload

WHERE = lambda path: "shared.slo.yaml:3 workloads.shared." + ".".join(map(str, path))  # noqa: E731
MIX = {"chat": {"weight": 0.9, "prompt_tokens": 512, "output_tokens": 128},
       "long_summarization": {"weight": 0.1, "prompt_tokens": 16000, "output_tokens": 256}}
SLO = {"chat": {"ttft_p95": "500ms", "itl_p99": "60ms"}, "long_summarization": {"ttft_p95": "5s", "tpot_p95": "50ms"}}


def mixed(**kw):
    spec = {"mix": MIX, "rate": 4, "requests": 200, "slo": SLO, **kw}
    return make_workload("shared", spec, WHERE)


def test_the_issue_example_builds_one_workload_with_two_judged_classes():
    w = mixed()
    assert w.mix is not None and [c.name for c in w.mix.classes] == ["chat", "long_summarization"]
    chat, summ = w.mix.classes
    assert (chat.weight, chat.prompt_tokens, chat.output_tokens) == (0.9, 512, 128)
    assert {b.key: b.limit for b in chat.budgets} == {"ttft_p95": 500.0, "itl_p99": 60.0,
                                                      "tpot_p95": 50.0}  # chat's class default stays
    assert {b.key: b.limit for b in summ.budgets} == {"ttft_p95": 5000.0, "tpot_p95": 50.0}
    assert w.budgets == ()          # nothing judged on the whole mix but the run-wide checks
    assert w.samples == 200 and w.load is not None and w.load.open_loop
    assert w.confidence is None     # an open loop: the point estimate, as every load run
    assert w.prompt_tokens == round(0.9 * 512 + 0.1 * 16000)  # the placeholder: the requests' mean


def test_a_class_takes_a_distribution_and_a_custom_class_needs_lengths():
    w = mixed(mix={"a": {"weight": 0.5, "prompt_tokens": {"distribution": "uniform", "min": 100, "max": 200},
                         "output_tokens": 16},
                   "chat": {"weight": 0.5}}, slo={"a": {"ttft_p95": "1s"}})
    a, chat = w.mix.classes
    assert isinstance(a.prompt_tokens, LengthDist) and a.nominal_prompt == 150
    assert (chat.prompt_tokens, chat.output_tokens) == (512, 128)  # a built-in class's lengths
    with pytest.raises(ConfigError, match=r"class 'b' is not a built-in class: give its prompt_tokens"):
        mixed(mix={"b": {"weight": 0.5, "prompt_tokens": 10}, "chat": {"weight": 0.5}}, slo={"b": {"ttft_p95": 1}})


@pytest.mark.parametrize("weights, match", [
    ((0.8, 0.1), r"workloads\.shared\.mix: the class weights must sum to 1, got 0\.8 \+ 0\.1 = 0\.9"),
    ((1.1, -0.1), r"mix\.long_summarization\.weight: expected the class's share of the requests, a number > 0"),
    ((1.0, 0), r"mix\.long_summarization\.weight: expected .* > 0"),
    ((0.9, "0.1"), r"got '0\.1'"),
])
def test_weights_that_do_not_sum_to_one_or_are_not_positive_are_refused(weights, match):
    mix = {"chat": {**MIX["chat"], "weight": weights[0]},
           "long_summarization": {**MIX["long_summarization"], "weight": weights[1]}}
    with pytest.raises(ConfigError, match=match):
        mixed(mix=mix)


def test_a_class_with_no_budgets_is_refused_naming_the_key_and_the_fix():
    mix = {**MIX, "batch": {"weight": 0.1, "prompt_tokens": 64, "output_tokens": 8}}
    mix["chat"] = {**MIX["chat"], "weight": 0.8}
    with pytest.raises(ConfigError, match=r"workloads\.shared\.slo\.batch: class 'batch' of the mix has no budgets "
                                          r"-- every class is judged on its own: add slo: \{batch:"):
        mixed(mix=mix)


@pytest.mark.parametrize("spec, match", [
    ({"slo": {**SLO, "ttft_p95": "1s"}}, r"slo\.ttft_p95: 'ttft_p95' is not a class of the mix .*a budget: put it "
                                         r"under a class"),
    ({"slo": {**SLO, "chatt": {}}}, r"'chatt' is not a class of the mix; did you mean 'chat'"),
    ({"prompt_tokens": 512}, r"workloads\.shared\.prompt_tokens: a mixed workload does not take prompt_tokens"),
    ({"mix": {"chat": MIX["chat"]}}, r"a mix needs at least two classes"),
    ({"mix": {**MIX, "chat": {**MIX["chat"], "rate": 3}}}, r"mix\.chat\.rate: unknown key 'rate'"),
    ({"requests": 5}, r"mix\.long_summarization\.weight: long_summarization \(weight 0\.1\) would get no request of "
                      r"5 -- raise requests to at least 10"),
    ({"requests": "auto", "rate": None}, r"give requests: N, not samples: auto"),
])
def test_bad_mixes_are_clear_errors(spec, match):
    spec = {k: v for k, v in spec.items()}
    with pytest.raises(ConfigError, match=match):
        mixed(**spec)


def test_class_counts_are_exact_by_largest_remainder():
    w = mixed()
    assert class_counts(w.mix, 200) == [180, 20]
    assert class_counts(w.mix, 7) == [6, 1]   # 6.3 / 0.7: the larger remainder gets the 7th
    assert sum(class_counts(w.mix, 13)) == 13


def test_the_sequence_is_seeded_shuffled_and_exact_per_cycle():
    mix = mixed().mix
    seq = class_sequence(mix, 200, seed=1)
    assert Counter(seq) == {"chat": 180, "long_summarization": 20}
    assert seq == class_sequence(mix, 200, seed=1) and seq != class_sequence(mix, 200, seed=2)
    at = [i for i, c in enumerate(seq) if c == "long_summarization"]
    assert min(at) < 100 < max(at)  # spread over the run, not sent in one burst


def test_blocks_of_a_run_send_consecutive_windows_of_one_cycle():
    """An A/B run's or a sweep's blocks: every arm the same classes, the run's counts exact."""
    mix = mixed().mix
    whole = class_sequence(mix, 40, seed=3)
    blocks = [class_sequence(window(mix, start, 40), 10, seed=3) for start in (0, 10, 20, 30)]
    assert sum(blocks, []) == whole
    assert Counter(sum(blocks, [])) == {"chat": 36, "long_summarization": 4}
    beyond = class_sequence(mix, 50, seed=3, cycle=40)  # past the cycle: the next cycle, exact too
    assert beyond[:40] == whole and len(beyond) == 50


def test_a_traces_rows_tagged_by_class_are_judged_per_class():
    """A trace whose slo maps classes to budgets: the rows' ``class`` field says which (checked at load)."""
    from pytest_llm_latency.core.spec.mix_spec import check_row_classes
    from pytest_llm_latency.core.spec.trace import read_trace

    w = make_workload("replay", {"trace": "t.jsonl", "slo": {"chat": {"ttft_p95": "500ms"},
                                                             "summarize": {"ttft_p95": "5s"}}}, WHERE)
    assert w.mix is not None and w.mix.from_rows and w.budgets == ()
    assert [(c.name, [b.key for b in c.budgets]) for c in w.mix.classes] == [("chat", ["ttft_p95"]),
                                                                             ("summarize", ["ttft_p95"])]
    lines = ['{"timestamp": 0, "input_length": 64, "output_length": 4, "class": "chat"}',
             '{"timestamp": 10, "input_length": 900, "output_length": 4, "class": "summarize"}']
    rows = read_trace(lines, "t.jsonl", 512)
    assert [r.klass for r in rows] == ["chat", "summarize"]
    check_row_classes(w.mix, rows, "t.jsonl")  # every row a class, every class a row
    bad = read_trace(lines[:1] + ['{"timestamp": 20, "input_length": 9, "output_length": 2, "class": "chta"}'],
                     "t.jsonl", 512)
    with pytest.raises(ConfigError, match=r"t\.jsonl:2: class: class 'chta', but the workload judges its rows per "
                                          r"class \(chat, summarize\); did you mean 'chat'"):
        check_row_classes(w.mix, bad, "t.jsonl")
    with pytest.raises(ConfigError, match=r"t\.jsonl: no row replayed has class 'summarize'"):
        check_row_classes(w.mix, rows[:1], "t.jsonl")
    with pytest.raises(ConfigError, match=r"t\.jsonl:1: class: expected a non-empty string, got 3"):
        read_trace(['{"timestamp": 0, "input_length": 64, "output_length": 4, "class": 3}'], "t.jsonl", 512)
    plain = make_workload("replay", {"trace": "t.jsonl", "slo": {"ttft_p95": "500ms"}}, WHERE)
    assert plain.mix is None and [b.key for b in plain.budgets] == ["ttft_p95"]


def test_budgets_on_the_whole_run_stand_beside_the_classes_never_under_one():
    w = mixed(slo={**SLO, "kv_transfer_p95": "200ms"})
    assert [b.key for b in w.budgets] == ["kv_transfer_p95"]  # judged on the run, as any workload's
    with pytest.raises(ConfigError, match=r"slo\.chat\.kv_transfer_p95: kv_transfer_p95 is judged on the whole run, "
                                          r"not one class's requests .* put it at the slo's top level"):
        mixed(slo={**SLO, "chat": {**SLO["chat"], "kv_transfer_p95": "200ms"}})
    with pytest.raises(ConfigError, match=r"slo\.long_summarization\.cold_ttft_max: .*judged on the whole run"):
        mixed(slo={**SLO, "long_summarization": {"cold_ttft_max": "5s"}})


def test_a_run_wide_samples_override_keeps_the_mix_counts_checked_per_class():
    from pytest_llm_latency.core.result.sample_size import check_min_samples
    from pytest_llm_latency.core.spec.workload import with_statistics

    w = mixed()
    assert with_statistics(w, {}, WHERE, "auto").samples == 200 and not with_statistics(w, {}, WHERE, "auto").sequential
    check_min_samples(w, "shared")  # 180 and 20 requests: every p95 supported
    with pytest.raises(ConfigError, match=r"class long_summarization of the mix \(weight 0\.1\) gets no request of 5"):
        check_min_samples(w, "--llm-latency-samples", 5)
    tight = mixed(requests=50, slo={**SLO, "long_summarization": {"ttft_p99": "5s"}})
    with pytest.raises(ConfigError, match=r"class long_summarization \(5 of 50 requests\): budget ttft_p99 .* needs "
                                          r">= 100 samples, got 5"):
        check_min_samples(tight, "shared.slo.yaml")
