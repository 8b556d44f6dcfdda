"""Duration units: one that a reader cannot tell apart is refused, never guessed."""
import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.spec.workload import make_workload, parse_duration_ms


@pytest.mark.parametrize("value", ["500m", "0.5 m", "2m"])
def test_m_is_ambiguous_not_minutes(value):
    """'500m' used to be read as 500 *minutes*: the budget was silently disabled."""
    with pytest.raises(ConfigError) as exc:
        parse_duration_ms(value, "chat.slo.yaml:7 workloads.chat.slo.ttft_p95")
    msg = str(exc.value)
    assert "chat.slo.yaml:7 workloads.chat.slo.ttft_p95" in msg
    assert "ambiguous" in msg and "did you mean 'ms' or 'min'?" in msg


def test_minutes_and_other_units_still_read():
    assert parse_duration_ms("2min", "x") == 120_000
    assert parse_duration_ms("500ms", "x") == 500
    assert parse_duration_ms("1.5s", "x") == 1500
    assert parse_duration_ms("250us", "x") == pytest.approx(0.25)


def test_unknown_unit_error_lists_every_accepted_unit():
    with pytest.raises(ConfigError) as exc:
        parse_duration_ms("5 hours", "x")
    for unit in ("ms", "s", "us", "ns", "min"):
        assert f" {unit}" in str(exc.value) or f"{unit}," in str(exc.value)


def test_ambiguous_budget_in_a_workload_is_a_config_error():
    with pytest.raises(ConfigError, match="ambiguous"):
        make_workload("chat", {"class": "chat", "slo": {"ttft_p95": "500m"}})
