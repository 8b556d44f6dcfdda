"""A/B in one run: a workload's ``baseline_target:`` resolved (its spec, ``mode`` and ``block``) for the A/B
drivers (``client/drivers/ab_interleaved.py``, ``ab_alternating.py``), which send the blocks.  The design,
the two modes and the verdict: docs/deploy-gate.md#ab-in-one-run."""
from __future__ import annotations

from typing import Any, Mapping

from ..core.errors import ConfigError
from ..core.redact import redact_url, split_url_credentials
from .session import TargetSpec, managed_command

#: requests per block of the ABAB interleaving (the last block may be shorter)
BLOCK = 5
#: requests per block when the targets alternate (each block costs a server start)
ALTERNATING_BLOCK = 10
MODES = ("interleaved", "alternating")
KEYS = ("url", "command", "ready", "env", "startup_timeout", "model", "api", "mode", "block")


class StartError(RuntimeError):
    """Alternating blocks: a target could not be started again (the test is a target failure)."""


def ab_mode(bt: Any, where: str) -> tuple[str, int]:
    """``(mode, block size)`` of a ``baseline_target`` (a URL: interleaved, ``BLOCK``)."""
    if not isinstance(bt, Mapping):
        return "interleaved", BLOCK
    mode = bt.get("mode", "interleaved")
    if mode not in MODES:
        raise ConfigError(f"{where} baseline_target.mode: expected interleaved (both targets run at once) or "
                          f"alternating (one at a time: stop one, start the other between blocks), got {mode!r}")
    block = bt.get("block", ALTERNATING_BLOCK if mode == "alternating" else BLOCK)
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ConfigError(f"{where} baseline_target.block: expected requests per block (an integer >= 1), "
                          f"got {block!r}")
    return mode, block


def check(bt: Any, where: str) -> Mapping:
    """The ``baseline_target`` as a mapping, its keys, mode and block checked (collection time too)."""
    if isinstance(bt, str):
        bt = {"url": bt}
    if not isinstance(bt, Mapping) or not (bt.get("url") or bt.get("command")):
        raise ConfigError(f"{where} baseline_target: expected a URL, or a mapping with url: or command: "
                          f"(a managed server like target.command), got {bt!r}")
    unknown = set(bt) - set(KEYS)
    if unknown:
        raise ConfigError(f"{where} baseline_target: unknown key(s) {', '.join(sorted(unknown))} (allowed: "
                          f"{', '.join(KEYS)})")
    ab_mode(bt, where)
    return bt


def baseline_spec(bt: Any, main: TargetSpec, where: str) -> TargetSpec:
    """The baseline target's spec; its API (and model, unless given) are the test target's."""
    bt = check(bt, where)
    mode, _ = ab_mode(bt, where)
    if mode == "alternating" and not (bt.get("command") and main.command):
        which = "baseline_target" if not bt.get("command") else "the test's target"
        raise ConfigError(f"{where} baseline_target.mode: alternating stops one target and starts the other "
                          f"between blocks, so both must be managed servers (command:); {which} is a URL -- "
                          f"use mode: interleaved, or give it a command")
    command, template, secrets = managed_command(bt.get("command"), f"{where} baseline_target.command")
    url, auth = split_url_credentials(bt["url"]) if bt.get("url") else ("managed://", None)
    return TargetSpec(url=url, api=str(bt.get("api") or main.api), model=bt.get("model") or main.model,
                      command=command, ready=str(bt.get("ready", "/health")),
                      startup_timeout=float(bt.get("startup_timeout", 120.0)),
                      env=tuple(sorted((str(k), str(v)) for k, v in (bt.get("env") or {}).items())),
                      command_template=template, auth=auth, secrets=secrets)


def describe(spec: TargetSpec) -> str:
    return " ".join(spec.command_template) if spec.command_template else redact_url(spec.url)
