"""A server sweep's arms (``server_sweep:``, ``core.spec.server_sweep``) resolved for the driver
(``client/drivers/arm_sweep.py``), before any request.

``flags:`` arms are the test's managed ``target.command`` with each arm's flags appended, one server at
a time (as alternating A/B blocks: ``plugin/ab.py``): the first arm starts here, then each block starts
its arm's server and stops it after.  The flags are first checked against what the command's ``--help``
lists (``targets/flag_help.py``, once, bounded): a flag it does not list is a configuration error naming
the flag and the arm; a help text that lists no options skips the check with a note.  An arm's flags are
expanded as the command is (``${VAR}``: the values masked in every output, the flags shown as written).
``urls:`` arms are servers already running (a ``reference://`` URL is started as any target is) and run at
once, interleaved."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

from ..core.errors import ConfigError, LatencyError, MeasurementError
from ..core.redact import expand_command, redact_url
from ..core.spec.server_sweep import ServerSweep, SweepArm, flag_names, unknown_flags
from ..core.spec.workload import Workload
from .ab import StartError, describe
from .session import LatencySession, TargetSpec

#: a start that failed: what ``sess.client`` raises for a target that cannot come up
START_ERRORS = (MeasurementError, LatencyError, OSError, RuntimeError)


def sweep_url_target(target: dict | None, workloads: Sequence[Workload]) -> dict:
    """The file's ``target:`` mapping, where every workload sweeps running servers (``urls:``) and it gives
    neither ``url`` nor ``command``: the first arm's URL stands in for the test's own (never started; the arms
    are the targets, the test's target gives them its api and model), so such a file needs no target.url."""
    out = dict(target or {})
    sweeps = [w.server_sweep for w in workloads]
    if out.get("url") or out.get("command") or not sweeps:
        return out
    if all(s is not None and s.mode == "urls" for s in sweeps):
        first = sweeps[0]
        assert first is not None
        out["url"] = first.arms[0].url
    return out


def check_sweep_target(sweep: ServerSweep, spec: TargetSpec) -> None:
    """A ``flags:`` sweep needs a managed target to append them to."""
    if sweep.mode == "flags" and not spec.command:
        raise ConfigError(f"{sweep.where}.flags: a flags sweep appends each arm's flags to the managed target's "
                          f"command, but the test's target is the URL {redact_url(spec.url)} -- give target.command "
                          f"(the server to start with each arm's flags, e.g. ['vllm', 'serve', MODEL, '--port', "
                          f"'{{port}}']), or list running servers under server_sweep.urls")


def check_flags(sweep: ServerSweep, spec: TargetSpec,
                read_help: Callable[..., tuple[str | None, str]] | None = None) -> list[str]:
    """Every arm's flags against the command's ``--help``: a ``ConfigError`` for a flag it does not list; the
    notes to show (the check skipped, and why)."""
    check_sweep_target(sweep, spec)
    names = {arm.name: flag_names(arm.flags) for arm in sweep.arms}
    if sweep.mode != "flags" or not any(names.values()):
        return []
    if read_help is None:
        from ..targets.flag_help import help_text

        read_help = help_text
    assert spec.command is not None
    shown = describe(spec)
    text, why = read_help(spec.command, dict(spec.env))
    if text is None:
        return [f"server_sweep: the arms' flags were not checked against the command: `{shown} --help`: {why}"]
    for arm in sweep.arms:
        missing = unknown_flags(names[arm.name], text)
        if missing is None:
            return [f"server_sweep: the arms' flags were not checked against the command: `{shown} --help` "
                    f"printed no list of options"]
        if missing:
            one = len(missing) == 1
            raise ConfigError(f"{arm.where}: arm {arm.name!r}: {', '.join(missing)} "
                              f"{'is not a flag' if one else 'are not flags'} of the managed command: `{shown} --help` "
                              f"lists no such option -- check the spelling, or drop {'it' if one else 'them'} from the "
                              f"arm")
    return []


def arm_spec(arm: SweepArm, spec: TargetSpec) -> TargetSpec:
    """The arm's target: the test's command with its flags appended, or its URL (the test's API and model).
    The flags' ``${VAR}`` / ``$VAR`` / ``~`` are expanded as the command's are (``plugin.session.managed_command``):
    messages show the flags as written, and the values put in join the command's secrets (masked everywhere)."""
    if arm.url is not None:
        from ..core.redact import split_url_credentials

        url, auth = split_url_credentials(arm.url)
        return TargetSpec(url=url, api=spec.api, model=spec.model, auth=auth)
    assert spec.command is not None and spec.command_template is not None
    flags, secrets = expand_command(arm.flags)
    return replace(spec, command=spec.command + tuple(flags), command_template=spec.command_template + arm.flags,
                   secrets=tuple(dict.fromkeys(spec.secrets + secrets)))


def _down(arm: SweepArm, exc: BaseException, when: str = "") -> StartError:
    return StartError(f"server_sweep arm {arm.name!r} ({arm.describe()}) could not start{when}: {exc}")


def sweep_arms(sess: LatencySession, spec: TargetSpec, workload: Workload) -> tuple[Any, Any, list[str]]:
    """``(the first arm's client, the driver's SweepArms, notes)``; ``StartError`` naming the arm and its
    flags when an arm cannot start, ``ConfigError`` for flags the command cannot take."""
    from ..client.drivers.base import SweepArms

    sweep = workload.server_sweep
    assert sweep is not None
    notes = check_flags(sweep, spec)
    specs = {arm.name: arm_spec(arm, spec) for arm in sweep.arms}
    for s in specs.values():  # every arm's secrets masked from the first message on, whichever arm says it
        sess.add_secrets(s)
    block = sweep.block(workload.samples)
    if sweep.mode == "urls":  # all running at once
        clients = []
        for arm in sweep.arms:
            try:
                clients.append(sess.client(specs[arm.name]))
            except START_ERRORS as exc:
                raise _down(arm, exc) from exc
        return clients[0], SweepArms(sweep.arms, tuple(clients), block), notes
    first = sweep.arms[0]
    try:  # a command that cannot start is found before any request
        client = sess.client(specs[first.name])
    except START_ERRORS as exc:
        raise _down(first, exc) from exc

    def starter(arm: SweepArm):
        def start():
            try:
                return sess.client(specs[arm.name])
            except START_ERRORS as exc:
                raise _down(arm, exc, " for a block") from exc
        return start

    def stop(name: str) -> None:
        sess.stop_server(specs[name])
    return client, SweepArms(sweep.arms, tuple(starter(a) for a in sweep.arms), block, stop), notes
