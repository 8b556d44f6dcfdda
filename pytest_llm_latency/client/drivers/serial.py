"""Serial: one stream, one request after another; stops at the first request the server
rejects as wrong (every other would be rejected too)."""
from __future__ import annotations

from ...core.result.result import Failure, is_deterministic_rejection
from ...core.spec.workload import Workload
from .base import Run, Sent
from .pipeline import measure_samples


class Serial:
    name = "serial"
    engine = False

    def applies(self, workload: Workload) -> bool:
        return True  # the fallback: no load, concurrency 1, fixed samples

    def send(self, one, samples, workload: Workload, run: Run, recover) -> Sent:
        sent, total = Sent(), len(samples)
        for i, p in enumerate(samples):
            sent.outcomes.append(one(p))
            if run.progress:
                run.progress(i + 1, total)
            last = sent.outcomes[-1]
            if isinstance(last, Failure) and is_deterministic_rejection(last.kind):
                sent.notes.append(f"stopped at the first request: it was rejected ({last.kind}); the "
                                  f"other {total - i - 1} would be too, so they were not sent")
                break
        return sent

    def measure(self, client, workload: Workload, run: Run):
        return measure_samples(client, workload, run, self)
