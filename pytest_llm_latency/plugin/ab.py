"""A/B in one run: a workload's ``baseline_target:`` (a URL, or a mapping with ``url`` or a
managed ``command``) is measured *interleaved* with the test's own target -- blocks of
``BLOCK`` requests, A B A B ... -- so that drift of the machine (a noisy neighbour, thermal
state) hits both arms alike.  The verdict is ``core.compare`` in the paired design: request i
of the candidate is paired with request i of the baseline target (same prompt lengths,
measured in adjacent blocks) and the pairs are resampled.  Each arm's prompts carry their own
salt: were both arms one server (the same command twice), shared prompts would hit its prompt
cache in the second arm and fake a TTFT difference.

Both managed targets run at the same time (one ``TargetPool``); targets that cannot both fit
on the machine (stop one, start the other between blocks) are not supported yet.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from ..core.errors import ConfigError
from ..core.redact import expand_command, redact_url, split_url_credentials
from ..core.result import evaluate
from .session import TargetSpec

#: requests per block of the ABAB interleaving (the last block may be shorter)
BLOCK = 5


def baseline_spec(bt: Any, main: TargetSpec, where: str) -> TargetSpec:
    """The baseline target's spec; its API (and model, unless given) are the test target's."""
    if isinstance(bt, str):
        bt = {"url": bt}
    if not isinstance(bt, Mapping) or not (bt.get("url") or bt.get("command")):
        raise ConfigError(f"{where} baseline_target: expected a URL, or a mapping with url: or command: "
                          f"(a managed server like target.command), got {bt!r}")
    unknown = set(bt) - {"url", "command", "ready", "env", "startup_timeout", "model", "api"}
    if unknown:
        raise ConfigError(f"{where} baseline_target: unknown key(s) {', '.join(sorted(unknown))} (allowed: url, "
                          f"command, ready, env, startup_timeout, model, api)")
    command, template, secrets = bt.get("command"), None, ()
    if command is not None:
        if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
            raise ConfigError(f"{where} baseline_target.command: expected a list of strings like "
                              f"['llama-server', '--port', '{{port}}'], got {command!r}")
        template = tuple(command)
        command, secrets = expand_command(command)
    url, auth = split_url_credentials(bt["url"]) if bt.get("url") else ("managed://", None)
    return TargetSpec(url=url, api=str(bt.get("api") or main.api), model=bt.get("model") or main.model,
                      url_source=f"{where} baseline_target", command=tuple(command) if command else None,
                      ready=str(bt.get("ready", "/health")), startup_timeout=float(bt.get("startup_timeout", 120.0)),
                      env=tuple(sorted((str(k), str(v)) for k, v in (bt.get("env") or {}).items())),
                      command_template=template, auth=auth, secrets=secrets)


def describe(spec: TargetSpec) -> str:
    return " ".join(spec.command_template) if spec.command_template else redact_url(spec.url)


def measure_interleaved(measure, client_a, client_b, workload, *, salt_context: str, **kw):
    """(candidate result, baseline-target result): ``workload.samples`` requests each, in
    blocks A B A B ...; every block of every arm has its own salt context (fresh prompts)."""
    n = workload.samples
    parts: dict[str, list] = {"a": [], "b": []}
    done, block = 0, 0
    while done < n:
        size = min(BLOCK, n - done)
        w = replace(workload, samples=size, warmup=workload.warmup if block == 0 else 0,
                    sequential=False, budgets=())
        for arm, client in (("a", client_a), ("b", client_b)):
            parts[arm].append(measure(client, w, salt_context=f"{salt_context}#ab{block}{arm}", **kw))
        done += size
        block += 1
    out = []
    for arm in ("a", "b"):
        results = parts[arm]
        records = [r for res in results for r in res.records]
        failures = [f for res in results for f in res.failures]
        prepared = [res for res in results if not res.prepared]
        if prepared:  # a prompt preparation failed: that result, as the single-target path reports it
            res = prepared[0]
        else:
            res = evaluate(workload, records, failures)
            res.extra.update(results[0].extra)
            res.notes[:0] = [x for x in results[0].notes if x not in res.notes]
        out.append(res)
    out[0].extra.update(ab_blocks=block, ab_block_size=BLOCK)
    return out[0], out[1]
