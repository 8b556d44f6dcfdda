"""Issue 37 with worker processes: the pools are read "before" when the workers are ready
(``client/drivers/pipeline.py``); when none got ready there is no such reading, and the disagg part says the
run never got ready rather than naming a pool as silent.  A fake worker driver that never calls ``on_ready``,
against the embedded reference target (its own /metrics standing for a pool that answers)."""
from __future__ import annotations

from pytest_llm_latency.client.drivers.base import Run, Sent
from pytest_llm_latency.client.drivers.pipeline import measure_samples
from pytest_llm_latency.client.server.pools import NEVER_READY
from pytest_llm_latency.core.measure.kv_transfer import DisaggTarget
from pytest_llm_latency.core.spec.workload import make_workload
from tests.unit.client.drivers.test_drivers import reference  # noqa: F401  (the module's reference target)


class NeverReady:
    """Worker processes (``warms_in_send``) of which none reached its samples: ``on_ready`` never runs."""
    name, engine, warms_in_send = "workers", False, True

    def send(self, one, samples, workload, run, recount):
        assert run.on_ready is not None   # the pipeline would read the pools there
        return Sent(notes=["worker 0 (pid 1) died before it was ready"])


def test_no_worker_ready_says_the_run_never_got_ready_not_a_silent_pool(reference):  # noqa: F811
    url, client = reference
    w = make_workload("w", {"class": "custom", "prompt_tokens": 16, "output_tokens": 2, "samples": 3, "warmup": 0,
                            "confidence": None})
    res = measure_samples(client, w, Run(seed=0, nonce="n", salt_context="t", disagg=DisaggTarget(url + "/metrics")),
                          NeverReady())
    assert res.disagg.transfer_note == NEVER_READY
    assert not any("pool" in n for n in res.notes), res.notes
