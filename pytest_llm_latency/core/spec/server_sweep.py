"""``server_sweep:``: one workload measured under N server settings ("arms"), interleaved in blocks as
an A/B run is (``client/drivers/arm_sweep.py``), each arm judged on the workload's own budgets
(``core.checks.arm_sweep``).

Two forms::

    server_sweep:
      flags:                       # the test's managed target.command with these flags appended,
        mnbt-512: "--chunked-prefill --max-num-batched-tokens 512"   # one server at a time
        mnbt-2048: [--chunked-prefill, --max-num-batched-tokens, "2048"]
        default: ""                # the command as it is
      block_size: 10               # requests of one arm per block (or rounds: R blocks per arm)

    server_sweep:
      urls: {a: "http://gpu-a:8000", b: "reference://h100-sxm/llama-3.1-8b?time_scale=0.5"}

Pure: ``parse_server_sweep`` checks the mapping (``ConfigError`` naming the key, where and the fix);
``flag_names`` / ``unknown_flags`` are the check of flags against a command's ``--help`` text (the plugin
runs the command: ``plugin/server_sweep.py``)."""
from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..errors import ConfigError
from .budgets import parse_int

KEY = "server_sweep"
SWEEP_KEYS = ("flags", "urls", "block_size", "rounds")
MODES = ("flags", "urls")
#: requests of one arm per block when not given: as an A/B run's (``plugin/ab.py``): urls run at once
#: (interleaved), flags restart the one server per block (alternating: each block costs a start)
URL_BLOCK, FLAG_BLOCK = 5, 10
#: an arm's name: what the table, the JSON and the JUnit properties (``llm.arms.<name>.*``) call it
NAME = re.compile(r"^[\w.+:=@-]+$")


@dataclass(frozen=True)
class SweepArm:
    """One setting: ``flags`` appended to the managed command, or a running server's ``url``."""
    name: str
    flags: tuple[str, ...] = ()
    url: str | None = None
    where: str = field(default="", compare=False)

    def describe(self) -> str:
        """``flags --max-num-batched-tokens 512`` / ``no extra flags`` / the URL (credentials masked)."""
        if self.url is not None:
            from ..redact import redact_url

            return redact_url(self.url)
        return "flags " + shlex.join(self.flags) if self.flags else "no extra flags"


@dataclass(frozen=True)
class ServerSweep:
    mode: str                          # flags | urls
    arms: tuple[SweepArm, ...]
    block_size: int | None = None      # None: URL_BLOCK / FLAG_BLOCK, or from rounds
    rounds: int | None = None
    where: str = field(default="", compare=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arms)

    def block(self, samples: int) -> int:
        """Requests of one arm per block for ``samples`` requests per arm."""
        if self.block_size is not None:
            return self.block_size
        if self.rounds is not None:
            return max(1, math.ceil(samples / self.rounds))
        return FLAG_BLOCK if self.mode == "flags" else URL_BLOCK


def _flags(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise ConfigError(f"{where}: cannot split {value!r} into arguments ({exc}) -- check the quotes, "
                              f"or give a list like [--max-num-batched-tokens, '512']") from None
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return tuple(str(v) for v in value)
    raise ConfigError(f"{where}: expected the flags as one string like '--max-num-batched-tokens 512' or a list "
                      f"like [--max-num-batched-tokens, '512'], got {type(value).__name__} {value!r}")


def parse_server_sweep(value: Any, where: Callable[[tuple], str]) -> ServerSweep:
    """``server_sweep:`` from its YAML value; ``where(path)`` names a key path's location."""
    here = where((KEY,))
    example = ("server_sweep: {flags: {mnbt-512: '--max-num-batched-tokens 512', mnbt-2048: "
               "'--max-num-batched-tokens 2048'}} or server_sweep: {urls: {a: URL, b: URL}}")
    if not isinstance(value, Mapping):
        raise ConfigError(f"{here}: expected a mapping, e.g. {example}; got {type(value).__name__} {value!r}")
    unknown = sorted(set(map(str, value)) - set(SWEEP_KEYS))
    if unknown:
        from .budgets import did_you_mean

        raise ConfigError(f"{here}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], SWEEP_KEYS)} -- allowed: "
                          f"{', '.join(SWEEP_KEYS)}")
    given = [m for m in MODES if value.get(m) is not None]
    if len(given) != 1:
        why = "both flags and urls" if given else "neither flags nor urls"
        raise ConfigError(f"{here}: give the arms as flags: (appended to the managed target.command, one server at "
                          f"a time) or as urls: (servers already running), got {why} -- e.g. {example}")
    mode = given[0]
    arms_spec = value[mode]
    if not isinstance(arms_spec, Mapping):
        raise ConfigError(f"{where((KEY, mode))}: expected a mapping of arm name to "
                          f"{'flags' if mode == 'flags' else 'URL'}, e.g. {example}; got {type(arms_spec).__name__}")
    arms: list[SweepArm] = []
    seen: dict[str, str] = {}
    for raw_name, setting in arms_spec.items():
        at = where((KEY, mode, raw_name))
        if isinstance(raw_name, bool):  # YAML 1.1: on/off/yes/no unquoted are booleans, not the names written
            raise ConfigError(f"{at}: arm name {raw_name!r}: YAML reads an unquoted on, off, yes, no, true or false "
                              f"as a boolean, not a name -- quote it, e.g. \"on\": ... and \"off\": ...")
        name = str(raw_name).strip() if raw_name is not None else ""
        if not name or not NAME.match(name):
            raise ConfigError(f"{at}: arm name {raw_name!r}: expected a non-empty name of letters, digits and "
                              f"._-+:=@ (no spaces), e.g. mnbt-2048 -- it names the arm in the table, JSON and JUnit")
        if name in seen:
            raise ConfigError(f"{at}: arm name {name!r} is given twice (first at {seen[name]}) -- name each arm once")
        seen[name] = at
        if mode == "flags":
            arms.append(SweepArm(name, flags=_flags(setting, at), where=at))
            continue
        if not isinstance(setting, str) or not setting.strip():
            raise ConfigError(f"{at}: expected the URL of a running server (http://host:port or reference://...), "
                              f"got {type(setting).__name__} {setting!r}")
        arms.append(SweepArm(name, url=setting.strip(), where=at))
    if len(arms) < 2:
        raise ConfigError(f"{where((KEY, mode))}: a server sweep compares settings: it needs at least two arms, got "
                          f"{len(arms)}{' (' + arms[0].name + ')' if arms else ''} -- add the setting to compare "
                          f"with (an arm with '' is the command as it is), or drop server_sweep for one setting")
    same = _same_setting(arms)
    if same is not None:
        raise ConfigError(f"{where((KEY, mode))}: arms {same[0]!r} and {same[1]!r} have the same "
                          f"{'flags' if mode == 'flags' else 'URL'} -- each arm must be a different setting")
    if "block_size" in value and "rounds" in value:
        raise ConfigError(f"{where((KEY, 'rounds'))}: block_size and rounds both set the blocks (rounds = samples / "
                          f"block_size): give one")
    block = parse_int(value["block_size"], where((KEY, "block_size")), 1) if "block_size" in value else None
    rounds = parse_int(value["rounds"], where((KEY, "rounds")), 1) if "rounds" in value else None
    return ServerSweep(mode, tuple(arms), block, rounds, where=here)


def _same_setting(arms: Sequence[SweepArm]) -> tuple[str, str] | None:
    seen: dict[Any, str] = {}
    for a in arms:
        key = a.url if a.url is not None else a.flags
        if key in seen:
            return seen[key], a.name
        seen[key] = a.name
    return None


def check_sweep_workload(spec: Mapping[str, Any], samples: Any, where: Callable[[tuple], str]) -> None:
    """What a server sweep does not combine with (it is the arms' loop: another A/B or rate loop cannot
    wrap it, and ``samples: auto`` would stop each arm on a look at its own)."""
    for other, why in (("baseline_target", "an A/B run compares two targets; a sweep compares its own arms"),
                       ("rate_sweep", "a rate sweep picks a rate per step; sweep the server at a fixed rate")):
        if spec.get(other) is not None:
            raise ConfigError(f"{where((KEY,))}: server_sweep does not combine with {other} ({why}) -- drop one")
    if samples == "auto":
        raise ConfigError(f"{where(('samples',))}: samples: auto does not combine with server_sweep: every arm is "
                          f"measured on the same number of requests, in blocks -- give samples: N (e.g. samples: 40)")


_FLAG = re.compile(r"^--?[A-Za-z][\w.-]*")


def flag_names(flags: Sequence[str]) -> list[str]:
    """The option names among ``flags`` (``--max-num-batched-tokens`` of ``--max-num-batched-tokens=512``,
    ``-ub``); values and negative numbers are not names."""
    return [m.group(0) for f in flags if (m := _FLAG.match(f)) is not None]


#: fewer distinct long options than this in a help text: not a list of the command's flags
USABLE_OPTIONS = 3


def unknown_flags(names: Sequence[str], help_text: str) -> list[str] | None:
    """The names ``help_text`` does not list; None when the text lists too few options to tell (no usable
    help: the check is skipped, never a refusal).  A name is listed where it stands alone: ``--foo N``,
    ``--foo=N``, ``-b, --batch-size N`` (llama.cpp), ``[--foo | --no-foo]`` (argparse); ``--foo`` and ``--no-foo``
    are both listed by ``--[no-]foo`` (vLLM)."""
    if len(set(re.findall(r"(?<![\w-])--[A-Za-z][\w-]*", help_text))) < USABLE_OPTIONS:
        return None
    missing = []
    for name in dict.fromkeys(names):
        if not any(re.search(p, help_text) for p in _spellings(name)):
            missing.append(name)
    return missing


def _spellings(name: str) -> list[str]:
    """The patterns of ``name`` as a help text may list it (``unknown_flags``)."""
    bare = name.lstrip("-")
    dashes = re.escape(name[: len(name) - len(bare)])
    out = [rf"(?<![\w-]){dashes}(?:\[no-\])?{re.escape(bare)}(?![\w-])"]
    if bare.startswith("no-") and len(bare) > 3:  # --no-foo as the negation of --[no-]foo
        out.append(rf"(?<![\w-]){dashes}\[no-\]{re.escape(bare[3:])}(?![\w-])")
    return out
