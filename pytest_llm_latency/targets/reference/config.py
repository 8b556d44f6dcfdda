"""``ReferenceConfig``: every knob of the reference server, one table for the URL and the CLI.

The same field names are used as ``reference://`` URL query keys (``launch.py``) and,
with ``-`` for ``_``, as ``serve-reference`` options (``pytest_llm_latency/cli/serve_reference.py``).
"""
from __future__ import annotations

import dataclasses
import math
import difflib
from dataclasses import dataclass, field
from typing import Any

from ...roofline import catalog
from ...core.errors import ConfigError
from . import physics as ph
from .faults import parse_fault
from .speculation import Speculation, parse_acceptance
from .tokenizer import RULES


def _field(default, help_text: str, flag: bool = False) -> Any:
    """A knob: its default and its ``serve-reference`` help (``flag``: a boolean switch)."""
    return field(default=default, metadata={"help": help_text, "flag": flag})


@dataclass(frozen=True)
class ReferenceConfig:
    hardware: str = _field("h100-sxm", "catalog hardware key or alias")
    model: str = _field("llama-3.1-8b", "catalog model key")
    efficiency: float | None = _field(None, "sets both decode_efficiency and prefill_efficiency")
    decode_efficiency: float | None = _field(
        None, f"fraction of peak memory bandwidth (default {ph.DEFAULT_DECODE_EFFICIENCY})")
    prefill_efficiency: float | None = _field(
        None, f"model FLOP utilisation of compute-bound work (default {ph.DEFAULT_PREFILL_EFFICIENCY})")
    peak_tflops: float | None = _field(None, "override the catalog's peak dense bf16 TFLOPS")
    time_scale: float = _field(1.0, "multiply every modelled duration (0 = no modelled delay)")
    jitter: float = _field(
        0.0, "coefficient of variation of a lognormal, mean-1 noise factor on every engine step "
        "(prefill and decode); 0 = off (exact roofline timings)")
    jitter_seed: int = _field(0, "seed of the jitter noise: same seed and same request sequence = same timings")
    max_num_seqs: int = _field(256, "most sequences decoding at once")
    kv_pool_tokens: int | None = _field(None, "KV pool size in tokens (default: from device memory)")
    gpu_memory_utilization: float = _field(ph.DEFAULT_GPU_MEMORY_UTILIZATION,
                                           "fraction of device memory for weights + KV pool")
    block_size: int = _field(16, "KV block size in tokens")
    prefix_caching: bool = _field(False, "enable prefix caching", flag=True)
    prompt_tokens_details: bool = _field(
        False, "report usage.prompt_tokens_details.cached_tokens with prefix caching off too (0), like vLLM "
        "--enable-prompt-tokens-details (with prefix_caching it is always reported)", flag=True)
    chunked_prefill: bool = _field(False, "enable chunked prefill", flag=True)
    max_num_batched_tokens: int | None = _field(None, "token budget of one step with chunked prefill (default 2048)")
    max_model_len: int | None = _field(None, "context length (default: the catalog's)")
    served_model_name: str | None = _field(None, "model name the API serves (default: the catalog model key)")
    stream_interval: int = _field(1, "tokens per streamed chunk (like vLLM --stream-interval)")
    fault: str | None = _field(None, "server-wide fault spec (see faults.py)")
    # -- speculative decoding / multi-token prediction (speculation.py, physics.py) -------------
    spec_tokens: int = _field(
        0, "speculative decoding: tokens drafted per decode step (k, like vLLM num_speculative_tokens; fewer on "
        "a request's last steps, never past max_tokens). Each engine step verifies them in one forward pass "
        "(the target's weights and KV read once, plus the drafter's bytes), emits 1 + accepted tokens in ONE "
        "stream chunk and counts vLLM's vllm:spec_decode_* counters on /metrics; 0 = off")
    spec_acceptance: str = _field(
        "1.0", "per-position draft acceptance: draft position i is accepted when every earlier one was and a draw "
        "< p (one number p: geometric, mean tokens per step 1 + p + p^2 + ... + p^k), or a comma list of "
        "spec_tokens conditional probabilities (e.g. 0.9,0.7,0.5); 1.0 = every draft accepted (1 + k tokens "
        "per step); needs spec_tokens")
    draft_model: str | None = _field(
        None, "catalog model key of a draft model: each drafted token reads its weights (once per drafting pass "
        "of the batch) and its own KV cache at the context; its weights and KV also take device memory "
        "(needs spec_tokens; default: no drafter bytes, like n-gram prompt lookup)")
    draft_bytes: float | None = _field(
        None, "bytes one drafting pass reads, for EAGLE / MTP heads (their layers and the LM head, e.g. ~1.3e9 "
        "for a Llama-3-8B EAGLE head at fp16; FLOPs counted as 16-bit weights), 0 for n-gram; "
        "instead of draft_model (needs spec_tokens)")
    spec_seed: int = _field(
        0, "seed of the acceptance draws: same seed and same request sequence = same accepted counts "
        "(needs spec_tokens)")
    # -- counting rules and Ollama's behaviours (ollama_api.py, residency.py) ----------------
    tokenizer: str = _field(
        "word", "token counting rule: word (one per whitespace-separated word) or chars3 (one per 3 characters)")
    x_accel_buffering: bool = _field(
        False, "send 'X-Accel-Buffering: no' with streams, as llama-server does (vLLM and SGLang do not): nginx "
        "then passes the stream on token by token even with its default proxy_buffering", flag=True)
    tokenize_endpoint: bool = _field(
        True, "serve /tokenize, /v1/tokenize and the Responses and Messages token counters (off: 404, like Ollama "
        "and many OpenAI-compatible servers)", flag=True)
    load_time: float = _field(
        0.0, "seconds (x time_scale) to load the model, paid by the first request after an idle unload and "
        "reported as Ollama's load_duration (0 = always loaded)")
    keep_alive: float = _field(
        300.0, "seconds a loaded model stays after its last request (Ollama's default 5m; a request's keep_alive "
        "overrides it; < 0 = forever); needs load_time > 0")
    evict_every: int = _field(
        0, "unload the model after every N-th generation request, as when another client's model evicts it "
        "(OLLAMA_MAX_LOADED_MODELS=1); the next request pays load_time (0 = never)")
    prompt_cache: int = _field(
        0, "Ollama API: remember the last N prompts; one sent again skips its prefill and its final object "
        "omits prompt_eval_count, as Ollama does (0 = off)")
    thinking_tokens: int = _field(
        0, "reasoning: the first N generated tokens are 'thinking' on Ollama (unless the request sends think: "
        "false) and, when the request asks for reasoning, reasoning on chat completions (reasoning_effort, "
        "chat_template_kwargs.enable_thinking), Responses (reasoning.effort) and Messages (thinking, capped by "
        "budget_tokens); effort low = N // 2, medium = N, high = 2 N; counted in the output tokens")
    ignore_eos: bool = _field(
        False, "every generation request runs to its max tokens, whatever it asks (as llama-server --ignore-eos): "
        "forced lengths on APIs that cannot ask for them (anthropic-messages, Ollama)", flag=True)
    constrained_slowdown: float = _field(
        1.0, "structured output (a JSON schema in response_format, text.format or output_format): a decode step "
        "in which a constrained request decodes takes this many times its roofline time (>= 1.0; 1.0 = free "
        "grammar masks); the whole batch shares that step")
    pd_link: str | None = _field(
        None, "run as a prefill/decode pair (disagg.py): a prefill engine and a decode engine on this hardware, "
        "each request's prompt KV (kv bytes per token x prompt tokens) crossing a simulated link between them, one "
        "transfer at a time (FIFO) at the link's bandwidth: a catalog link key (ib-hdr, ib-ndr, nvlink-4, "
        "pcie-5-x16, ...) or GB/s (e.g. 25). The pools serve vLLM's /metrics at /prefill/metrics and "
        "/decode/metrics (the decode pool with the NIXL connector's vllm:nixl_xfer_time_seconds and "
        "vllm:nixl_bytes_transferred); /metrics answers 404, as a proxy has none")
    host: str = _field("127.0.0.1", "bind address")
    port: int = _field(0, "bind port (0 = any free port)")

    # -- derived values ----------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self.served_model_name or self.model

    def hardware_spec(self):
        return catalog.hardware(self.hardware)

    def model_spec(self):
        return catalog.model(self.model)

    def physics(self) -> ph.Physics:
        dec = self.decode_efficiency or self.efficiency or ph.DEFAULT_DECODE_EFFICIENCY
        pre = self.prefill_efficiency or self.efficiency or ph.DEFAULT_PREFILL_EFFICIENCY
        return ph.Physics.from_specs(self.hardware_spec(), self.model_spec(), decode_efficiency=dec,
                                     prefill_efficiency=pre, peak_tflops=self.peak_tflops,
                                     drafter=self.drafter())

    def speculation(self) -> Speculation | None:
        """The engine's drafting plan, None with speculative decoding off (``spec_tokens`` 0)."""
        if self.spec_tokens <= 0:
            return None
        return Speculation(self.spec_tokens, parse_acceptance(self.spec_acceptance, self.spec_tokens),
                           self.spec_seed)

    def draft_spec(self):
        return catalog.model(self.draft_model) if self.draft_model and self.spec_tokens > 0 else None

    def drafter(self) -> ph.Drafter | None:
        """What each drafting pass reads (``physics.Drafter``); None: nothing (n-gram, or off)."""
        d = self.draft_spec()
        if d is not None:
            return ph.Drafter(weight_bytes=d.weight_bytes, kv_bytes_per_token=d.kv_bytes_per_token,
                              params=d.params, name=d.name)
        if self.spec_tokens > 0 and self.draft_bytes:
            return ph.Drafter(weight_bytes=self.draft_bytes, params=self.draft_bytes / 2.0,
                              name=f"{self.draft_bytes:g}-byte draft head")
        return None

    def link(self):
        """The P/D pair's link (``core.roofline.kv_transfer.Link``); None: one engine (``pd_link`` unset)."""
        return None if self.pd_link is None else catalog.resolve_link(self.pd_link, "reference: pd_link")

    def context_length(self) -> int:
        return self.max_model_len or self.model_spec().max_model_len

    def pool_tokens(self) -> int:
        if self.kv_pool_tokens:
            return self.kv_pool_tokens
        hw, model = self.hardware_spec(), self.model_spec()
        pool = ph.kv_pool_tokens(hw, model, self.gpu_memory_utilization, draft=self.draft_spec())
        if pool is None:
            # No device memory in the catalog (CPUs): room for 4 full-length sequences.
            return 4 * self.context_length()
        if pool < self.block_size:
            raise ConfigError(
                f"reference: {model.name} weights "
                f"({(model.total_params or model.params) * model.weight_bytes_per_param / 1e9:.1f} GB"
                + (f" + draft model {d.name} {d.weight_bytes / 1e9:.1f} GB" if (d := self.draft_spec()) else "")
                + ") do not fit in "
                f"{hw.name} memory ({hw.memory_gb} GB x {self.gpu_memory_utilization}); pass "
                f"kv_pool_tokens=N to model a pool anyway")
        return pool

    def batched_tokens(self) -> int | None:
        if not self.chunked_prefill:
            return None
        return self.max_num_batched_tokens or 2048

    def validate(self) -> "ReferenceConfig":
        """Raise ConfigError on any bad value; return self."""
        self.hardware_spec()
        self.model_spec()
        for name in ("efficiency", "decode_efficiency", "prefill_efficiency", "gpu_memory_utilization"):
            v = getattr(self, name)
            if v is not None and not 0 < v <= 1:
                raise ConfigError(f"reference: {name} must be in (0, 1], got {v}")
        if not (math.isfinite(self.time_scale) and self.time_scale >= 0):
            raise ConfigError(f"reference: time_scale must be a finite number >= 0, got {self.time_scale}")
        if not (math.isfinite(self.jitter) and 0 <= self.jitter <= 1):
            raise ConfigError(f"reference: jitter must be in [0, 1] (a coefficient of variation), "
                              f"got {self.jitter}")
        for name in ("max_num_seqs", "block_size", "stream_interval"):
            if getattr(self, name) < 1:
                raise ConfigError(f"reference: {name} must be >= 1")
        for name in ("kv_pool_tokens", "max_num_batched_tokens", "max_model_len", "peak_tflops"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ConfigError(f"reference: {name} must be a finite number > 0, got {v}")
        if self.tokenizer not in RULES:
            raise ConfigError(f"reference: tokenizer must be one of {', '.join(RULES)}, got {self.tokenizer!r}")
        if not (math.isfinite(self.load_time) and self.load_time >= 0) or not math.isfinite(self.keep_alive):
            raise ConfigError(f"reference: load_time must be >= 0 and keep_alive finite, got "
                              f"{self.load_time}, {self.keep_alive}")
        if not (math.isfinite(self.constrained_slowdown) and self.constrained_slowdown >= 1.0):
            raise ConfigError(f"reference: constrained_slowdown must be a finite number >= 1.0, "
                              f"got {self.constrained_slowdown}")
        if self.prompt_cache < 0 or self.thinking_tokens < 0 or self.evict_every < 0:
            raise ConfigError("reference: prompt_cache, thinking_tokens and evict_every must be >= 0")
        if self.max_num_batched_tokens and not self.chunked_prefill:
            raise ConfigError("reference: max_num_batched_tokens needs chunked_prefill")
        if not 0 <= self.port < 65536:
            raise ConfigError(f"reference: bad port {self.port}")
        parse_fault(self.fault, source="reference fault")
        self.link()
        self._validate_speculation()
        self.pool_tokens()
        return self

    def _validate_speculation(self) -> None:
        if not 0 <= self.spec_tokens <= MAX_SPEC_TOKENS:
            raise ConfigError(f"reference: spec_tokens must be in [0, {MAX_SPEC_TOKENS}] (0 = no speculative "
                              f"decoding), got {self.spec_tokens}")
        if self.spec_tokens == 0:
            for f in dataclasses.fields(self):
                if f.name in _SPEC_KNOBS and getattr(self, f.name) != f.default:
                    raise ConfigError(f"reference: {f.name} needs spec_tokens > 0 (speculative decoding is off); "
                                      f"add spec_tokens=K or drop {f.name}")
            return
        parse_acceptance(self.spec_acceptance, self.spec_tokens, source="reference")
        if self.draft_model is not None and self.draft_bytes is not None:
            raise ConfigError("reference: give draft_model (a draft model) or draft_bytes (an EAGLE/MTP head), "
                              "not both")
        if self.draft_bytes is not None and not (math.isfinite(self.draft_bytes) and self.draft_bytes >= 0):
            raise ConfigError(f"reference: draft_bytes must be a finite number >= 0 (0 = n-gram lookup), "
                              f"got {self.draft_bytes}")
        try:
            self.draft_spec()
        except ConfigError as e:
            raise ConfigError(f"reference: draft_model: {e}") from None

    # -- conversions -------------------------------------------------------------------
    @classmethod
    def from_strings(cls, values: dict[str, str], *, source: str = "reference") -> "ReferenceConfig":
        """Build from string values (URL query); unknown keys and bad values raise ConfigError."""
        kwargs: dict = {}
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for key, raw in values.items():
            name = key.replace("-", "_")
            if name not in fields:
                close = difflib.get_close_matches(name, list(fields), n=3, cutoff=0.6)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ConfigError(f"{source}: unknown key {key!r}{hint} "
                                  f"(known: {', '.join(fields)})")
            kwargs[name] = _convert(fields[name], raw, source)
        return cls(**kwargs)

    def to_cli_args(self) -> list[str]:
        """``serve-reference`` arguments that rebuild this config."""
        args: list[str] = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            opt = "--" + f.name.replace("_", "-")
            if f.metadata.get("flag"):
                args.append(opt if value else "--no-" + opt[2:])
            else:
                args += [opt, str(value)]
        return args


#: a P/D pair's pools (``pd_link``, disagg.py): where each serves its /metrics on the server's port
POOL_PATHS = {"prefill": "/prefill/metrics", "decode": "/decode/metrics"}
MAX_SPEC_TOKENS = 32
_SPEC_KNOBS = ("spec_acceptance", "draft_model", "draft_bytes", "spec_seed")
_BOOLS = {"": True, "1": True, "true": True, "yes": True, "on": True,  # "": ``?prefix_caching``
          "0": False, "false": False, "no": False, "off": False}


def _convert(f: dataclasses.Field, raw: str, source: str):
    kind = str(f.type)
    try:
        if f.metadata.get("flag"):
            return _BOOLS[raw.strip().lower()]
        if raw.strip().lower() in ("", "none") and "None" in kind:
            return None
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
        return raw
    except (KeyError, ValueError):
        raise ConfigError(f"{source}: bad value {raw!r} for {f.name} ({kind})") from None
