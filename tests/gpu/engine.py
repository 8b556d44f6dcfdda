"""The GPU tier's own decode engine: a Llama-style decoder in plain PyTorch.

``LlamaForCausalLM``'s modules as ``nn.Module``s (RMSNorm, RoPE with Llama 3's frequency
scaling when the config has it, grouped-query attention, a SwiGLU MLP, an untied LM head), in
the exact shapes of a Hugging Face ``config.json`` (``model_config``; ``layers`` keeps the layer
shapes and changes their number), with random weights (``randn * 0.02`` from one seeded
generator).  Batch 1, a static KV cache of ``max_len`` positions, greedy decode (argmax) that
never stops before ``max_tokens`` (there is no EOS here at all).

Prefill is one forward pass over the whole prompt; its argmax is the first generated token.
Each later token is one decode step, run in one of two modes:

* ``graphs``: the one-token step (embedding, every layer, the LM head, the argmax, and the
  update of the step's own input token and position) captured once in a
  ``torch.cuda.CUDAGraph`` and replayed: one launch per step;
* ``eager``: the same modules called from Python every step, each of their ~50 kernels per
  layer launched one by one, so the CPU's launch cost is paid every step (what the roofline
  diagnosis calls a fixed cost per step).

The engine times its own decode: the wall time between the first and the last generated
token being on the host (each ``.item()`` synchronises with the device), over N - 1 steps,
the same definition as the plugin's TPOT.  On a CPU it runs ``eager`` only (a tiny config:
``tiny_config``), for a self-check without a GPU.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

#: the Llama 3.1 8B config the roofline catalog ships (the shapes the tier serves)
LLAMA_CONFIG = (Path(__file__).resolve().parents[2] / "pytest_llm_latency" / "roofline" / "configs"
                / "llama-3.1-8b-instruct.json")
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}
MODES = ("graphs", "eager")
INIT_STD = 0.02


def model_config(path: str | Path = LLAMA_CONFIG, *, layers: int | None = None) -> dict:
    """The config at ``path``; ``layers`` replaces ``num_hidden_layers`` (same layer shapes)."""
    cfg = json.loads(Path(path).read_text())
    if layers is not None:
        if layers < 1:
            raise ValueError(f"layers must be >= 1, got {layers}")
        cfg["num_hidden_layers"] = int(layers)
    return cfg


def tiny_config() -> dict:
    """A two-layer Llama with the 8B's structure (GQA 2:1, untied head), for CPU self-checks."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
            "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
            "num_hidden_layers": 2, "vocab_size": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "max_position_embeddings": 4096, "tie_word_embeddings": False, "torch_dtype": "float32",
            "hidden_act": "silu", "attention_bias": False, "mlp_bias": False}


def _inv_freq(cfg: dict, head_dim: int) -> torch.Tensor:
    """RoPE inverse frequencies (fp32), with the ``llama3`` ``rope_scaling`` applied."""
    inv = 1.0 / (float(cfg.get("rope_theta", 10000.0)) ** (torch.arange(0, head_dim, 2, dtype=torch.float64)
                                                            / head_dim))
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) == "llama3":
        factor, lo, hi = float(rs["factor"]), float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
        old = float(rs["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        smooth = ((old / wavelen) - lo) / (hi - lo)
        mid = (1 - smooth) * inv / factor + smooth * inv
        inv = torch.where(wavelen > old / lo, inv / factor, torch.where(wavelen < old / hi, inv, mid))
    return inv.float()


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the two halves of the last dimension (the Hugging Face Llama convention)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


@dataclass(frozen=True)
class Generation:
    """One request: the generated token ids and the engine's own timing."""
    tokens: list[int]
    prefill_ms: float          # from the call to the first token on the host
    step_ms: float | None      # (t_last - t_first) / (N - 1); None for N < 2
    t_first_ns: int
    t_last_ns: int


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(n)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class Attention(nn.Module):
    """Grouped-query attention over ``T`` new positions, with a static cache ``[kv_heads, L, head_dim]``.

    ``pos`` None (prefill): the ``T`` positions from 0 are written to the cache and attend to each
    other (``mask`` causal, ``[T, T]``).  ``pos`` a one-element tensor (decode, ``T`` = 1): the token
    is written at ``pos`` and attends to the whole cache (``mask`` ``[1, L]``: -inf past ``pos``).
    A KV head's G query heads are its rows (``[kv_heads, G x T, head_dim]``): no K/V copy per step."""

    def __init__(self, hidden: int, n_heads: int, n_kv: int, head_dim: int):
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim, self.group = n_heads, n_kv, head_dim, n_heads // n_kv
        self.q_proj = nn.Linear(hidden, n_heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, n_kv * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, n_kv * head_dim, bias=False)
        self.o_proj = nn.Linear(n_heads * head_dim, hidden, bias=False)

    def forward(self, x, cos, sin, mask, kc, vc, pos):
        t, hd = x.shape[0], self.head_dim
        q = _rope(self.q_proj(x).view(t, self.n_heads, hd).transpose(0, 1), cos, sin)   # [heads, T, hd]
        k = _rope(self.k_proj(x).view(t, self.n_kv, hd).transpose(0, 1), cos, sin)      # [kv, T, hd]
        v = self.v_proj(x).view(t, self.n_kv, hd).transpose(0, 1)
        if pos is None:
            kc[:, :t].copy_(k)
            vc[:, :t].copy_(v)
            keys, values = k, v
        else:
            kc.index_copy_(1, pos, k)
            vc.index_copy_(1, pos, v)
            keys, values = kc, vc
        rows = q.reshape(self.n_kv, self.group * t, hd)
        scores = torch.matmul(rows, keys.transpose(1, 2)) * (hd ** -0.5) + mask.repeat(self.group, 1)
        probs = torch.softmax(scores.float(), dim=-1).to(x.dtype)
        out = torch.matmul(probs, values).view(self.n_heads, t, hd).transpose(0, 1)    # [T, heads, hd]
        return self.o_proj(out.reshape(t, self.n_heads * hd))


class MLP(nn.Module):
    def __init__(self, hidden: int, inter: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c: dict, head_dim: int):
        super().__init__()
        h, eps = int(c["hidden_size"]), float(c.get("rms_norm_eps", 1e-5))
        self.input_layernorm = RMSNorm(h, eps)
        self.self_attn = Attention(h, int(c["num_attention_heads"]), int(c["num_key_value_heads"]), head_dim)
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.mlp = MLP(h, int(c["intermediate_size"]))

    def forward(self, x, cos, sin, mask, kc, vc, pos):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, kc, vc, pos)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    """``LlamaForCausalLM``'s modules: embeddings, decoder layers, final norm, untied LM head."""

    def __init__(self, c: dict, head_dim: int):
        super().__init__()
        h = int(c["hidden_size"])
        self.embed_tokens = nn.Embedding(int(c["vocab_size"]), h)
        self.layers = nn.ModuleList(DecoderLayer(c, head_dim) for _ in range(int(c["num_hidden_layers"])))
        self.norm = RMSNorm(h, float(c.get("rms_norm_eps", 1e-5)))
        self.lm_head = nn.Linear(h, int(c["vocab_size"]), bias=False)

    def forward(self, ids, cos, sin, mask, cache, pos) -> torch.Tensor:
        """Logits of the last of ``ids``' positions, ``[1, vocab]``."""
        x = self.embed_tokens(ids)
        for layer, (kc, vc) in zip(self.layers, cache):
            x = layer(x, cos, sin, mask, kc, vc, pos)
        return self.lm_head(self.norm(x[-1:]))


class DecodeEngine:
    """Random weights in ``config``'s shapes on ``device``; ``generate`` serves one request."""

    def __init__(self, config: dict, *, device: str = "cuda", dtype: str = "bf16", mode: str = "graphs",
                 max_len: int = 1024, seed: int = 0):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        self.device = torch.device(device)
        if mode == "graphs" and self.device.type != "cuda":
            raise ValueError("mode 'graphs' needs a CUDA device (CUDA graphs); use mode 'eager' on a CPU")
        self.config, self.mode, self.dtype_name, self.max_len = config, mode, dtype, int(max_len)
        self.dtype = DTYPES[dtype]
        n_heads, n_kv = int(config["num_attention_heads"]), int(config["num_key_value_heads"])
        if n_heads % n_kv:
            raise ValueError(f"num_attention_heads {n_heads} is not a multiple of num_key_value_heads {n_kv}")
        self.n_kv, self.vocab = n_kv, int(config["vocab_size"])
        self.head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // n_heads)
        self.model = self._build(seed)
        self._init_state()
        self.graph: torch.cuda.CUDAGraph | None = None
        if mode == "graphs":
            self._capture()

    # -- set-up ----------------------------------------------------------------------------
    @torch.no_grad()
    def _build(self, seed: int) -> Llama:
        """The modules allocated on the device without their default init, then ``randn * 0.02``
        from one seeded generator (norm weights 1)."""
        with torch.device("meta"):
            model = Llama(self.config, self.head_dim)
        model = model.to(dtype=self.dtype).to_empty(device=self.device).requires_grad_(False).eval()
        gen = torch.Generator(device=self.device).manual_seed(seed)
        for name, p in model.named_parameters():
            if isinstance(model.get_submodule(name.rsplit(".", 1)[0]), RMSNorm):
                p.fill_(1.0)
            else:
                p.normal_(0.0, INIT_STD, generator=gen)
        return model

    @torch.no_grad()
    def _init_state(self) -> None:
        dev, L = self.device, self.max_len
        shape = (self.n_kv, L, self.head_dim)
        self.cache = [(torch.zeros(shape, device=dev, dtype=self.dtype), torch.zeros(shape, device=dev,
                                                                                     dtype=self.dtype))
                      for _ in self.model.layers]
        freqs = torch.outer(torch.arange(L, dtype=torch.float32), _inv_freq(self.config, self.head_dim))
        self.cos, self.sin = freqs.cos().to(dev, self.dtype), freqs.sin().to(dev, self.dtype)
        self.positions = torch.arange(L, device=dev)
        self.zero = torch.zeros((), device=dev, dtype=self.dtype)
        self.neg_inf = torch.full((), float("-inf"), device=dev, dtype=self.dtype)
        # the decode step's static input and output: what a CUDA graph reads and writes
        self.tok_in = torch.zeros(1, dtype=torch.long, device=dev)
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)
        self.tok_out = torch.zeros(1, dtype=torch.long, device=dev)

    @torch.no_grad()
    def _capture(self) -> None:
        """Warm the step up on a side stream (cuBLAS handles, kernels chosen), then capture it."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(3):
                self._decode_step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        torch.cuda.synchronize(self.device)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._decode_step()
        torch.cuda.synchronize(self.device)

    # -- the two passes --------------------------------------------------------------------
    def _decode_step(self) -> None:
        """One token at ``self.pos``: reads ``tok_in``, writes the KV cache at ``pos`` and the argmax
        to ``tok_out`` and ``tok_in``, then advances ``pos`` (so a graph replays step after step)."""
        cos, sin = self.cos.index_select(0, self.pos), self.sin.index_select(0, self.pos)   # [1, hd/2]
        mask = torch.where(self.positions <= self.pos, self.zero, self.neg_inf).view(1, -1)  # [1, L]
        nxt = self.model(self.tok_in, cos, sin, mask, self.cache, self.pos).argmax(-1)
        self.tok_out.copy_(nxt)
        self.tok_in.copy_(nxt)
        self.pos.add_(1)

    def _prefill(self, ids: torch.Tensor) -> torch.Tensor:
        """The whole prompt in one pass (causal); fills the cache's first T positions; the argmax."""
        t = ids.shape[0]
        causal = torch.full((t, t), float("-inf"), device=self.device, dtype=self.dtype).triu_(1)
        return self.model(ids, self.cos[:t], self.sin[:t], causal, self.cache, None).argmax(-1)

    # -- serving ---------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompt_ids: list[int], max_tokens: int,
                 on_token: Callable[[int], None] | None = None) -> Generation:
        """Exactly ``max_tokens`` tokens after ``prompt_ids`` (ids are taken modulo the vocabulary).
        ``on_token(id)`` is called as each token reaches the host (a server streams it there)."""
        if not prompt_ids or max_tokens < 1:
            raise ValueError("generate needs a non-empty prompt and max_tokens >= 1")
        if len(prompt_ids) + max_tokens > self.max_len:
            raise ValueError(f"{len(prompt_ids)} prompt + {max_tokens} output tokens exceed the engine's "
                             f"{self.max_len} positions")
        t0 = time.perf_counter_ns()
        ids = torch.tensor([i % self.vocab for i in prompt_ids], dtype=torch.long, device=self.device)
        first = self._prefill(ids)
        self.tok_in.copy_(first)
        self.pos.fill_(len(prompt_ids))
        tokens = [int(first.item())]
        t_first = t_last = time.perf_counter_ns()
        if on_token is not None:
            on_token(tokens[0])
        for _ in range(max_tokens - 1):
            if self.graph is not None:
                self.graph.replay()
            else:
                self._decode_step()
            tokens.append(int(self.tok_out.item()))     # waits for the step: the token is on the host
            t_last = time.perf_counter_ns()
            if on_token is not None:
                on_token(tokens[-1])
        step = (t_last - t_first) / (len(tokens) - 1) / 1e6 if len(tokens) > 1 else None
        return Generation(tokens, (t_first - t0) / 1e6, step, t_first, t_last)

    def describe(self) -> dict:
        """What the engine is, for the server's ``/engine/stats``: the config it was built from."""
        n = sum(p.numel() for p in self.model.parameters())
        return {"mode": self.mode, "dtype": self.dtype_name, "device": str(self.device),
                "device_name": torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu",
                "max_len": self.max_len, "params": n, "config": self.config}
