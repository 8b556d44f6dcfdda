"""Per-run state, kept in ``config.stash[SESSION_KEY]``: settings, one pooled
client per target, embedded/managed servers, and cleanup.  No pytest hooks here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..core.errors import ConfigError
from ..core.redact import expand_command, split_url_credentials
from ..client.transport.clock import MEASUREMENT_CLOCK
from .options import Settings, api_key_from_env


@dataclass(frozen=True)
class TargetSpec:
    """A resolved target.  Secrets are kept out of what it shows: ``url`` carries no
    ``user:password@`` (that is ``auth``, sent as basic auth), and ``command`` (with ``${VAR}``
    expanded) is shown as ``command_template``; ``secrets`` are the expanded values."""

    url: str
    api: str
    model: str | None
    command: tuple[str, ...] | None = field(default=None, repr=False)
    ready: str = "/health"
    startup_timeout: float = 120.0
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # values may be tokens
    command_template: tuple[str, ...] | None = None
    auth: tuple[str, str] | None = field(default=None, repr=False)
    secrets: tuple[str, ...] = field(default=(), repr=False, compare=False)
    # a disaggregated target (issue 37): its pools' /metrics (URLs, or paths on ``url``) and the link between them
    prefill_metrics_url: str | None = None
    decode_metrics_url: str | None = None
    kv_link: str | None = None

    @property
    def disaggregated(self) -> bool:
        return bool(self.prefill_metrics_url or self.decode_metrics_url)

    def describe(self) -> str:
        return f"{self.url} ({self.api}{', model ' + self.model if self.model else ''})"


@dataclass
class LatencySession:
    settings: Settings
    transport_factory: Callable[[str], Any] | None = None
    clock: Callable[[], int] = MEASUREMENT_CLOCK
    _clients: dict = field(default_factory=dict, repr=False)
    _servers: dict = field(default_factory=dict, repr=False)
    _pool: Any = field(default=None, repr=False)
    _closers: list = field(default_factory=list, repr=False)
    _secrets: set = field(default_factory=set, repr=False)
    nonce: str = ""  # the run's salt nonce (``run_nonce``); "" only for sessions built by hand
    _measured: dict = field(default_factory=dict, repr=False)
    baseline_doc: dict | None = field(default=None, repr=False)  # --llm-latency-baseline (plugin.baseline)

    def salt_context(self, nodeid: str, workload: str) -> str:
        """Which measurement of the run this is: the test, the workload and how often that test
        measured it before.  With the nonce it determines the salts, so no two measurements of
        a run share prompts, and ``--llm-latency-nonce`` replays any single test exactly
        (independent of test order, selection and xdist workers)."""
        nodeid = nodeid.removesuffix("@llm-latency")  # xdist loadgroup's suffix: replays run without it
        k = self._measured.get((nodeid, workload), 0)
        self._measured[(nodeid, workload)] = k + 1
        return f"{nodeid}|{workload}|{k}"

    @property
    def api_key(self) -> str | None:
        return api_key_from_env()

    def add_secrets(self, spec: TargetSpec) -> None:
        """Mask this target's secrets (URL password, expanded command values) in every
        message of the session from now on."""
        from ..core.redact import credential_secrets

        self._secrets.update(spec.secrets, credential_secrets(spec.auth))

    def timeouts(self):
        from ..client.transport.http import Timeouts

        s = self.settings
        return Timeouts(connect_s=s.get("connect_timeout"), idle_s=s.get("idle_timeout"),
                        total_s=s.get("total_timeout"))

    def redactor(self):
        """Masks the API key, every registered target secret and any ``user:password@``."""
        from ..core.redact import Redactor, credential_secrets

        url = self.settings.get("url")
        from_url = credential_secrets(split_url_credentials(url)[1]) if isinstance(url, str) else ()
        return Redactor((self.api_key, *self._secrets, *from_url))

    def resolve_url(self, spec: TargetSpec) -> str:
        """Start what the URL or command names (reference:// or a managed command); return http URL.

        Managed commands go through one ``TargetPool`` per session: the same
        (command, env, ready) is started once and shared; a command that failed
        to start is not retried for every test; a dead server is reported."""
        self.add_secrets(spec)
        key = (spec.url, spec.command, spec.env)
        if key in self._servers:
            server = self._servers[key]
            if hasattr(server, "check_alive"):
                server.check_alive()
            return server.url
        if spec.command:
            if self._pool is None:
                import tempfile

                from ..targets.managed import TargetPool

                self._pool = TargetPool(tempfile.mkdtemp(prefix="llm-latency-targets-"))
                self._closers.append(self._pool.close)
            server = self._pool.get(list(spec.command), ready_path=spec.ready, startup_timeout_s=spec.startup_timeout,
                                    env=dict(spec.env), display_command=spec.command_template,
                                    secrets=spec.secrets)
        elif spec.url.startswith("reference://"):
            from ..targets.reference.launch import parse_reference_url, start_reference

            server = start_reference(parse_reference_url(spec.url), mode="subprocess")
            self._closers.append(server.stop)
        else:
            return spec.url
        self._servers[key] = server
        return server.url

    def stop_server(self, spec: TargetSpec) -> bool:
        """Stop a managed target on purpose (A/B alternating blocks); the next ``client(spec)``
        starts it again, on a new port.  False for a URL target (nothing of ours to stop)."""
        key = (spec.url, spec.command, spec.env)
        if not spec.command or key not in self._servers or self._pool is None:
            return False
        server = self._servers.pop(key)
        for ck in [ck for ck in self._clients if ck[0] == server.url]:
            self._clients.pop(ck)  # its port is gone; the httpx client is closed with the session
        return self._pool.release(list(spec.command), ready_path=spec.ready, env=dict(spec.env))

    def server_for(self, spec: TargetSpec):
        return self._servers.get((spec.url, spec.command, spec.env))

    def client(self, spec: TargetSpec):
        """One pooled httpx client per target (reused across tests).  Its pool grows to the
        concurrency each workload asks for (``runner.measure`` → ``ensure_connections``)."""
        from ..client.transport.http import make_http_client
        from ..client.runner import Target, make_client

        url = self.resolve_url(spec)
        key = (url, spec.api, spec.model, spec.auth)
        if key not in self._clients:
            if spec.auth and self.api_key:
                raise ConfigError(f"target {spec.url}: the URL carries user:password@ credentials and "
                                  f"LLM_LATENCY_API_KEY is set; both would be the Authorization header — "
                                  f"use one (the key as a Bearer token, or the URL's basic auth)")
            transport = self.transport_factory(url) if self.transport_factory else None
            http = make_http_client(self.timeouts(), self.api_key, transport, auth=spec.auth)
            self._closers.append(http.close)
            self._clients[key] = make_client(Target(url, spec.api, spec.model), http, clock=self.clock,
                                             timeouts=self.timeouts(), redact=self.redactor())
        return self._clients[key]

    def close(self) -> None:
        while self._closers:
            fn = self._closers.pop()
            try:
                fn()
            except Exception:  # teardown must go on
                pass


def run_nonce(settings: Settings, workerinput: dict | None = None) -> str:
    """The run's salt nonce: pinned by --llm-latency-nonce (replay), else the controller's
    (an xdist worker's ``workerinput``, so every worker salts alike), else fresh."""
    pinned = settings.get("nonce")
    if pinned:
        return pinned
    if workerinput and workerinput.get("llm_latency_nonce"):
        return str(workerinput["llm_latency_nonce"])
    import secrets  # not client.prepare.tokens.new_nonce: that would load httpx in every pytest run

    return secrets.token_hex(8)


def target_from(settings: Settings, yaml_target: dict | None = None, where: str = "",
                marker: dict | None = None) -> TargetSpec:
    """Resolve url/api/model with marker > CLI > env > ini > YAML > default."""
    yaml_target = yaml_target or {}
    marker = marker or {}
    url = settings.pick("url", marker=marker.get("url"), yaml=yaml_target.get("url"), yaml_source=where)
    api = settings.pick("api", marker=marker.get("api"), yaml=yaml_target.get("api"), yaml_source=where)
    model = settings.pick("model", marker=marker.get("model"), yaml=yaml_target.get("model"), yaml_source=where)
    command, template, secrets = managed_command(yaml_target.get("command"), f"{where} target.command")
    if command and url.value and url.source != where:
        command, template, secrets = None, None, ()  # a URL from marker/CLI/env/ini outranks the file's command
    if not url.value and not command:
        raise ConfigError("no LLM server URL: set --llm-latency-url, LLM_LATENCY_URL, ini llm_latency_url, "
                          "or target.url in the SLO file (or --llm-latency-skip for lanes without a server)")
    plain_url, auth = split_url_credentials(url.value) if url.value else (url.value, None)
    env = yaml_target.get("env") or {}
    startup = yaml_target.get("startup_timeout", 120.0)
    if isinstance(startup, bool) or not isinstance(startup, (int, float)) or startup <= 0:
        raise ConfigError(f"{where} target.startup_timeout: expected seconds > 0, got {startup!r}")
    pools = {key: settings.pick(key, marker=marker.get(key), yaml=yaml_target.get(key),
                                yaml_source=f"{where} target.{key}").value
             for key in ("prefill_metrics_url", "decode_metrics_url", "kv_link")}
    return TargetSpec(url=plain_url or "managed://", api=api.value or "openai-completions", model=model.value,
                      command=command, ready=str(yaml_target.get("ready", "/health")), startup_timeout=float(startup),
                      env=tuple(sorted((str(k), str(v)) for k, v in env.items())),
                      command_template=template, auth=auth, secrets=secrets, **reference_pools(plain_url, pools))


def reference_pools(url: str | None, pools: dict[str, Any]) -> dict[str, Any]:
    """A ``reference://...?pd_link=`` target's pools and link, where none are given: ``/prefill/metrics``,
    ``/decode/metrics`` (``targets/reference/disagg.py``) and its ``pd_link``."""
    if not (isinstance(url, str) and url.startswith("reference://") and "pd_link" in url):
        return pools
    from ..targets.reference.config import POOL_PATHS
    from ..targets.reference.launch import parse_reference_url

    link = parse_reference_url(url).pd_link
    if link is None:
        return pools
    return {"prefill_metrics_url": pools["prefill_metrics_url"] or POOL_PATHS["prefill"],
            "decode_metrics_url": pools["decode_metrics_url"] or POOL_PATHS["decode"],
            "kv_link": pools["kv_link"] if pools["kv_link"] is not None else link}


def managed_command(command: Any, where: str) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None, tuple[str, ...]]:
    """A managed target's ``command`` (None: none): ``(argv, template, secrets)``.  ``${VAR}`` / ``$VAR`` / ``~``
    are expanded in argv, so files can name binaries and models portably; messages show the template, and the
    values put in (``secrets``) are masked in every output."""
    if command is None:
        return None, None, ()
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        raise ConfigError(f"{where}: expected a list of strings like ['llama-server', '--port', '{{port}}'], "
                          f"got {command!r}")
    argv, secrets = expand_command(command)
    return tuple(argv), tuple(command), secrets
