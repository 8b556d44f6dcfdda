"""Where the plugin keeps its run state: ``config.stash`` / ``item.stash`` keys and their
accessors.  Hooks, collectors and the fixture all import this module; it imports
nothing of theirs, so the pytest layer has no import cycle."""
from __future__ import annotations

import pytest

from .session import LatencySession

#: the per-run ``LatencySession`` (settings, clients, started servers)
SESSION_KEY = pytest.StashKey[LatencySession]()
#: the run's result entries, from each report's ``llm_latency_results`` (controller side under xdist)
RESULTS_KEY = pytest.StashKey[list]()
#: the ``LatencyFixture`` of one item
FIXTURE_KEY = pytest.StashKey[object]()
#: the result entries of one item (``report.document.result_entry``), put on its call report
ENTRIES_KEY = pytest.StashKey[list]()
#: the header note when ``--dist load`` was switched to ``loadgroup``
XDIST_NOTE_KEY = pytest.StashKey[str]()


def get_session(config: pytest.Config) -> LatencySession:
    return config.stash[SESSION_KEY]
