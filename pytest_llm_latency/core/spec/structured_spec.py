"""The ``structured:`` workload key (issue 36): structured output against a JSON Schema file, the
budget on its TPOT overhead, the request fields each API dialect carries the schema in, and the
prompts of a structured run (constrained samples, interleaved unconstrained twins).

Pure: the schema file is read and checked by the plugin (``plugin/structured_load.py``), which
fills ``StructuredSpec.schema``; the answers are validated in the send path
(``client/load/schema_check.py``).  docs/writing-slos.md#structured-output.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any, Callable, Mapping

from ..errors import ConfigError
from ..measure.structured import COMPARISON, CONSTRAINED, SchemaAsk, pair_roles
from ..prompts.synthesis import Prompt

STRUCTURED_KEY = "structured"
STRUCTURED_KEYS = ("json_schema",)
#: a ceiling on ``core.measure.structured.tpot_overhead`` (a fraction: 0.2 = constrained TPOT p50 at most 20%
#: above the unconstrained twins'); judged by ``core.checks.structured``
OVERHEAD_BUDGET = "structured_tpot_overhead_max"

Where = Callable[[tuple], str]


@dataclass(frozen=True)
class StructuredSpec:
    """``structured: {json_schema: FILE}``: the file as written (``path``; the plugin resolves it
    against the SLO file's folder, or the test file's for a marker or ``measure()``), where it was
    set, the overhead budget (``structured_tpot_overhead_max``; None: not asked, no twins are sent)
    and, once the plugin has read it, the schema."""
    path: str
    where: str = ""
    overhead_max: float | None = None
    schema: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        """The schema's name in the request (OpenAI's ``json_schema.name``: ``[a-zA-Z0-9_-]``, 64 at most)."""
        stem = PurePath(self.path).name.split(".")[0] or "schema"
        return "".join(c if c.isalnum() or c in "_-" else "_" for c in stem)[:64]

    @property
    def compares(self) -> bool:
        """Are unconstrained twins sent (the overhead is asked for)?"""
        return self.overhead_max is not None


FIX = "give the path of a JSON Schema file, e.g. structured: {json_schema: schemas/answer.json}"


def parse_structured(value: Any, where: Where) -> StructuredSpec:
    """``structured: {json_schema: FILE}`` → a ``StructuredSpec`` (the file is not read here)."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where((STRUCTURED_KEY,))}: expected a mapping like {{json_schema: answer.schema.json}}, "
                          f"got {type(value).__name__} {value!r} -- {FIX}")
    for k in value:
        if k not in STRUCTURED_KEYS:
            raise ConfigError(f"{where((STRUCTURED_KEY, k))}: unknown key {k!r} -- allowed: "
                              f"{', '.join(STRUCTURED_KEYS)} ({FIX})")
    path = value.get("json_schema")
    if not isinstance(path, str) or not path.strip():
        got = "nothing" if path is None else f"{type(path).__name__} {path!r}"
        raise ConfigError(f"{where((STRUCTURED_KEY, 'json_schema'))}: expected a file path, got {got} -- {FIX}")
    return StructuredSpec(path.strip(), where((STRUCTURED_KEY, "json_schema")))


def parse_overhead_max(value: Any, where: str) -> float:
    """``structured_tpot_overhead_max: 0.2``: a fraction >= 0 (0.2 = 20% slower per token at most)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 100:
        raise ConfigError(f"{where}: {OVERHEAD_BUDGET} is a ceiling on the TPOT overhead of constrained decoding, "
                          f"a fraction >= 0 (0.2: the constrained requests' TPOT p50 at most 20% above the "
                          f"unconstrained ones'), got {value!r}")
    return float(value)


def with_overhead(spec: StructuredSpec | None, value: Any, where: str) -> StructuredSpec:
    """``spec`` with its overhead budget (YAML ``slo:``, a marker's budgets); a ConfigError without ``structured:``."""
    if spec is None:
        raise ConfigError(f"{where}: {OVERHEAD_BUDGET} needs a structured workload: add "
                          f"structured: {{json_schema: FILE}} to the workload")
    return replace(spec, overhead_max=None if value is None else parse_overhead_max(value, where))


def check_structured(s: StructuredSpec | None, *, agent: bool, trace: bool, samples: Any, where: Where) -> None:
    """A structured workload sends prompts through the sample path: not agent sessions (their turns carry
    tools); its unconstrained twins need a fixed number of samples (not ``samples: auto``, whose rounds
    would decide on the twins too) and prompts of their own (not a trace's rows)."""
    if s is None:
        return
    if agent:
        raise ConfigError(f"{where((STRUCTURED_KEY,))}: agent sessions send tool-calling turns; structured output "
                          f"is not supported there -- measure it in a workload of its own")
    if s.compares and samples == "auto":
        raise ConfigError(f"{where(('samples',))}: {OVERHEAD_BUDGET} sends every sample twice (with and without "
                          f"the schema) and compares the two sets; samples: auto does not combine with it -- give "
                          f"samples: N (e.g. samples: 20)")
    if s.compares and trace:
        raise ConfigError(f"{where(('slo', OVERHEAD_BUDGET))}: a trace replay sends its rows as they are; the "
                          f"unconstrained twins of {OVERHEAD_BUDGET} need prompts of their own -- drop the budget, "
                          f"or measure the overhead on a synthetic workload")


def schema_fields(api: str, name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The body fields that carry ``schema`` on ``api`` (``client.APIS``' names), beside the body's own.

    * ``openai-chat``: ``response_format: {type: json_schema, json_schema: {name, schema}}`` (OpenAI, vLLM,
      SGLang, llama.cpp);
    * ``openai-completions``: the same ``response_format`` (vLLM, SGLang) and llama.cpp's top-level
      ``json_schema`` (its /v1/completions reads no ``response_format``); vLLM's older ``guided_json`` and
      newer ``structured_outputs`` are not sent: one request may carry one of them only;
    * ``openai-responses``: OpenAI's ``text.format`` and ``response_format``, which llama.cpp honours
      there (it ignores ``text.format``: tests/unit/recordings/README.md);
    * ``anthropic-messages``: ``output_format: {type: json_schema, schema}`` (llama.cpp's /v1/messages
      drops it: the answers' validation says so);
    * ``ollama``, ``ollama-chat``: ``format: <schema>``.

    On the OpenAI dialects ``ignore_eos: false`` and ``min_tokens: 0`` replace the forced length:
    constrained decoding ends at the grammar's end, where EOS is the only token left."""
    schema = dict(schema)
    chat_format = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    free = {"ignore_eos": False, "min_tokens": 0}
    if api == "openai-chat":
        return {"response_format": chat_format, **free}
    if api == "openai-completions":
        return {"response_format": chat_format, "json_schema": schema, **free}
    if api == "openai-responses":
        return {"text": {"format": {"type": "json_schema", "name": name, "schema": schema}},
                "response_format": chat_format, **free}
    if api == "anthropic-messages":
        return {"output_format": {"type": "json_schema", "schema": schema}}
    if api in ("ollama", "ollama-chat"):
        return {"format": schema}
    raise ConfigError(f"structured output: no request field is known for api {api!r} -- use one of openai-chat, "
                      f"openai-completions, openai-responses, anthropic-messages, ollama, ollama-chat")


def structured_prompts(prompts: list[Prompt], spec: StructuredSpec, first: int, pairs: int) -> list[Prompt]:
    """``prompts`` asking for ``spec``'s schema: ``prompts[first:first + 2 x pairs]`` alternate between
    constrained samples and their unconstrained twins (``core.measure.structured.pair_roles``, each prompt
    with its own salt), every other prompt is constrained (warm-up, ramp-up, drain, cold start)."""
    if spec.schema is None:
        raise ValueError(f"structured_prompts: the schema of {spec.path!r} has not been read")
    roles = [CONSTRAINED] * len(prompts)
    roles[first:first + 2 * pairs] = pair_roles(pairs)[:max(0, len(prompts) - first)]
    asks = {role: SchemaAsk(spec.name, spec.schema, role) for role in (CONSTRAINED, COMPARISON)}
    return [replace(p, structured=asks[role]) for p, role in zip(prompts, roles)]
