"""Session fixtures of the proxy tier: one real nginx in front of reference targets, in the
setups users deploy (see ``SETUPS``).

Skip policy: the tier skips, saying why, only where no nginx binary is installed
(``.ci/run`` installs Debian's ``nginx-light``; its failure is stated there).  An nginx
that is installed but does not start fails the tier with its error log.
"""
from __future__ import annotations

import pytest

from tests.helpers.nginxproxy import Nginx, NginxError, Site, find_nginx, nginx_version, readme_recommended
from pytest_llm_latency.targets.process import free_port
from pytest_llm_latency.targets.reference.launch import start_reference

#: the upstream of the passing setups: the examples' reference target (TTFT ~18 ms, TPOT
#: ~6.9 ms for the chat workload).  At half its time (TPOT 3.4 ms) a client descheduled
#: for a few ms on a busy 2-core machine already reads 8% of chunks in pairs, close to the
#: bunching note's 10%; at full time such noise stays well below it.
FAST_UPSTREAM = "reference://h100-sxm/llama-3.1-8b"
#: the same, sending ``X-Accel-Buffering: no`` with its streams as llama-server does
#: (vLLM and SGLang send no such header)
FAST_ACCEL_UPSTREAM = FAST_UPSTREAM + "?x_accel_buffering=1"
#: a prefill 100x slower than the examples' (prefill MFU 0.005): TTFT ~1.7 s for the chat
#: workload's 512 prompt tokens, above the read-timeout setup's proxy_read_timeout
SLOW_PREFILL_UPSTREAM = "reference://h100-sxm/llama-3.1-8b?prefill_efficiency=0.005"
READ_TIMEOUT_S = 0.5

#: gzip for SSE as a site might enable it for everything (nginx-light has the gzip filter)
GZIP = ("gzip on;", "gzip_types text/event-stream application/json;", "gzip_proxied any;", "gzip_min_length 0;")
#: nginx's limit_rate is a per-second byte budget: once the second's budget is spent, the
#: rest waits for the next second and leaves in one burst (real bunching).  nginx 1.22
#: applies it to buffered responses only (with proxy_buffering off it had no effect:
#: E2E as direct), so this setup is the README's block with nginx's default buffering.
#: 24k/s is below the stream's ~37 KB/s: each chat response takes ~1.1 s.
LIMIT_RATE = ("limit_rate 24k;",)


def setups(fast: str, slow: str, dead: str, fast_accel: str) -> list[Site]:
    """name -> upstream and location directives.  ``default``: nginx's defaults (HTTP/1.0
    upstream, buffering on) in front of a server that sends ``X-Accel-Buffering: no``;
    ``default_vllm_like``: the same defaults in front of one that does not; the others
    start from the README's recommended block."""
    rec = tuple(readme_recommended())
    no_timeout = tuple(d for d in rec if not d.startswith("proxy_read_timeout"))
    buffered = tuple(d for d in rec if d != "proxy_buffering off;")
    assert len(buffered) == len(rec) - 1 and len(no_timeout) == len(rec) - 1, rec
    return [
        Site("default", fast_accel),
        Site("default_vllm_like", fast),
        Site("sse", fast, rec),
        Site("gzip", fast, rec + GZIP),
        Site("limit_rate", fast, buffered + LIMIT_RATE),
        Site("read_timeout", slow, no_timeout + (f"proxy_read_timeout {int(READ_TIMEOUT_S * 1000)}ms;",)),
        Site("upstream_down", dead),
    ]


@pytest.fixture(scope="session")
def nginx_binary() -> str:
    binary = find_nginx()
    if binary is None:
        pytest.skip("nginx is not installed: the proxy tier needs a real nginx (.ci/run installs Debian's "
                    "nginx-light; apt-get install nginx-light)")
    return binary


def _hostport(url: str) -> str:
    return url.split("://", 1)[1].rstrip("/")


@pytest.fixture(scope="session")
def upstreams():
    """The reference targets behind the proxy (own processes, so their timing is not the
    test process's), and a loopback port nothing listens on (the upstream that is down)."""
    with start_reference(FAST_UPSTREAM) as fast, start_reference(SLOW_PREFILL_UPSTREAM) as slow, \
            start_reference(FAST_ACCEL_UPSTREAM) as accel:
        yield {"fast": fast.url, "slow": slow.url, "dead": f"http://127.0.0.1:{free_port()}",
               "fast_accel": accel.url}


@pytest.fixture(scope="session")
def proxy(nginx_binary, upstreams):
    """One nginx with every setup, each on its own port; stopped by its pid at the end."""
    sites = setups(*(_hostport(upstreams[k]) for k in ("fast", "slow", "dead", "fast_accel")))
    nginx = Nginx(nginx_binary, sites)
    try:
        nginx.start()
    except NginxError as exc:
        nginx.remove()
        pytest.fail(f"nginx ({nginx_binary}) is installed but did not start: {exc}", pytrace=False)
    nginx.version = nginx_version(nginx_binary)
    nginx.read_timeout_s = READ_TIMEOUT_S
    yield nginx
    nginx.stop()
    nginx.remove()
