import importlib
import pkgutil

# pytester's in-process runs unload modules first imported inside them, while
# `from . import x` can still find the stale attribute on the package: import
# every plugin module (and numpy, which cannot load twice) up front instead.
import httpcore  # noqa: F401  (httpx imports it lazily; load it before pytester can unload it)
import httpx  # noqa: F401
import numpy  # noqa: F401
import pytest
import yaml  # noqa: F401

import pytest_llm_latency

for _mod in pkgutil.walk_packages(pytest_llm_latency.__path__, "pytest_llm_latency."):
    if _mod.name.endswith(".__main__"):  # running it would run the CLI
        continue
    try:
        importlib.import_module(_mod.name)
    except ImportError:  # optional extras (gguf) may be missing
        pass

pytest_plugins = ["pytester"]

#: pytest-timeout's limit for the real-server tier (``integration`` marker).  Its first
#: test builds llama-server in a session fixture (~8 min on 2 quiet cores, longer when
#: busy), and the plugin runs inside it allow 600 s; the global ini ``timeout`` is for
#: everything else.
INTEGRATION_TIMEOUT_S = 2400


#: how a ``slow_tier`` test is asked for (CI asks: ``.ci/run``'s second pytest command)
SLOW_TIER_OPTION = "--slow-tier"


def pytest_addoption(parser):
    parser.addoption(SLOW_TIER_OPTION, action="store_true", default=False,
                     help="also run the slow tier (tests marked slow_tier: real servers measured at length, the "
                          "figures the docs quote); CI runs it as its own command after `pytest tests`")


def pytest_collection_modifyitems(config, items):
    slow = config.getoption(SLOW_TIER_OPTION)
    skip = pytest.mark.skip(reason=f"slow tier (real servers measured at length): run with `pytest tests "
                                   f"{SLOW_TIER_OPTION} -m slow_tier`; CI runs it (.ci/run)")
    for item in items:
        if item.get_closest_marker("integration") and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(INTEGRATION_TIMEOUT_S))
        if item.get_closest_marker("slow_tier") and not slow:
            item.add_marker(skip)


#: the CPUs ``workers: auto`` sees in the tests (``client.placement.shares.host_cpus``): 2, whatever the
#: machine, so a default-settings load with a local target runs in one process everywhere (2 - 1
#: left for the server); a test that needs more processes sets its own
TEST_HOST_CPUS = 2


@pytest.fixture(autouse=True)
def _pinned_host_cpus(monkeypatch):
    from pytest_llm_latency.client.placement import shares

    monkeypatch.setattr(shares, "host_cpus", lambda: TEST_HOST_CPUS)
