"""The plugin's own markers never trip --strict-markers, with or without pytest-xdist."""
import pytest

FILE = ("workloads: {w: {class: custom, prompt_tokens: 16, output_tokens: 8, samples: 3, warmup: 0, "
        "slo: {ttft_p50: 10s}}}\n")
URL = "--llm-latency-url=reference://h100-sxm/llama-3.1-8b?time_scale=0"


@pytest.mark.parametrize("xdist", [pytest.param("-pno:xdist", id="without-xdist"),
                                   pytest.param("-pxdist", id="with-xdist")])
@pytest.mark.parametrize("skip", [False, True], ids=["measured", "skipped"])
def test_strict_markers_and_no_unknown_mark_warning(pytester, xdist, skip):
    if xdist == "-pxdist":
        pytest.importorskip("xdist")
    pytester.makefile(".slo.yaml", w=FILE)
    pytester.makepyfile(test_m="""
        import pytest

        @pytest.mark.llm_slo(workload="custom", prompt_tokens=16, output_tokens=8, samples=3, warmup=0,
                             ttft_p50="10s")
        def test_marker():
            pass

        def test_fixture(llm_latency):
            llm_latency.measure(workload="custom", prompt_tokens=16, output_tokens=8, samples=3, warmup=0)
    """)
    # 3 samples: the point estimate (no sample size up to 4 decides a p50 at the default 95%)
    args = ["-p", "no:cacheprovider", xdist, "--strict-markers", "-W", "error::pytest.PytestUnknownMarkWarning", URL,
            "--llm-latency-confidence=null"]
    if skip:
        args.append("--llm-latency-skip")
    r = pytester.runpytest_subprocess(*args, timeout=120)
    assert "INTERNALERROR" not in r.stdout.str() + r.stderr.str()
    assert "xdist_group" not in r.stdout.str()
    if skip:
        r.assert_outcomes(skipped=3)
    else:
        r.assert_outcomes(passed=3)
