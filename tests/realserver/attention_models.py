"""Random-weight GGUF models of three attention kinds the pinned llama.cpp loads (issue 34):

* ``swa-gemma3``: Gemma 3 with every layer sliding (``sliding_window_pattern`` 0, as llama.cpp
  reads it: Mistral-7B-v0.1 style), a 32-token window.
* ``moe-qwen3``: Qwen3-MoE, 64 routed experts of which 1 is used per token.
* ``mla-deepseek2``: DeepSeek-V2/V3 attention as converted today (``key_length_mla`` /
  ``value_length_mla`` with the split ``attn_k_b`` / ``attn_v_b`` tensors): llama.cpp caches the
  latent, ``kv_lora_rank + rope dim`` = 32 elements per token per layer, K only.

Each is shaped so that what the naive count (full attention on every layer, every expert read,
per-head K and V) gets wrong dominates a decode step at the context of its test: the naive bytes
per step are 30 to 40 times the right ones (worked out by hand in ``test_attention_kinds_llama.py``).
Two costs of llama.cpp on one core set the odd shapes (measured on a 2-core EPYC VM):

* prefill writes the whole KV cache and its activations, about 140 MB of full-attention KV per
  second, so the naive KV at 4 000 tokens is kept near 270 MB (about 2 s of prefill): tiny hidden
  sizes (16) carry wide attention (16 heads of 256, or one MLA head);
* decode attention costs per query head and cached token (about 60 ns for MLA's absorbed heads,
  150 ns for a 256-wide Gemma head, a full layer at 4 000 tokens about 10 ms), so the sliding
  model has no full layer and the MLA model one query head with 8 192-wide no-rope K and V:
  per-head K/V of 8 192 + 16 + 8 192 elements is what the naive count charges per token, against
  the 32 cached.

Vocabulary, clean-ASCII output and F32 weights as ``make_models`` (its module docstring): hidden
dim 0 is constant, no layer writes it (row 0 of ``attn_output`` / ``ffn_down`` / every expert's
``ffn_down_exps`` is 0), so the output matrix's column 0 keeps unwanted tokens from being sampled.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: bump when the bytes of these models change (their file names carry it; make_models.FORMAT_VERSION
#: is the Llama models')
ATTENTION_FORMAT_VERSION = 1


@dataclass(frozen=True)
class SlidingSpec:
    """Gemma 3 with sliding layers of ``window`` tokens (``pattern``: llama.cpp's
    ``sliding_window_pattern``, 0 = every layer)."""
    name: str
    n_embd: int
    n_layer: int
    n_head: int            # = KV heads (no GQA): the most KV per query head
    head_dim: int
    n_ff: int
    window: int
    n_ctx: int
    seed: int
    pattern: int = 0       # sliding_window_pattern: 0 = every layer sliding; n = full attention every n-th
    arch: str = "gemma3"


@dataclass(frozen=True)
class MoESpec:
    """Qwen3-MoE: ``n_expert`` routed experts per layer, ``n_expert_used`` of them per token."""
    name: str
    n_embd: int
    n_layer: int
    n_head: int
    head_dim: int
    n_ff_exp: int
    n_expert: int
    n_expert_used: int
    n_ctx: int
    seed: int
    arch: str = "qwen3moe"


@dataclass(frozen=True)
class MLASpec:
    """DeepSeek-V2/V3 attention (no q LoRA, dense FFN in every layer)."""
    name: str
    n_embd: int
    n_layer: int
    n_head: int
    qk_nope: int
    qk_rope: int
    v_head: int
    kv_lora_rank: int
    n_ff: int
    n_ctx: int
    seed: int
    arch: str = "deepseek2"


AttentionSpec = SlidingSpec | MoESpec | MLASpec

ATTENTION_SPECS: dict[str, AttentionSpec] = {
    "swa-gemma3": SlidingSpec("swa-gemma3", n_embd=16, n_layer=4, n_head=16, head_dim=256, n_ff=32, window=32,
                              n_ctx=8192, seed=11),
    "moe-qwen3": MoESpec("moe-qwen3", n_embd=256, n_layer=4, n_head=2, head_dim=64, n_ff_exp=256, n_expert=64,
                         n_expert_used=1, n_ctx=2048, seed=12),
    "mla-deepseek2": MLASpec("mla-deepseek2", n_embd=16, n_layer=4, n_head=1, qk_nope=8192, qk_rope=16,
                             v_head=8192, kv_lora_rank=16, n_ff=32, n_ctx=8192, seed=13),
}


def _common(w, spec: AttentionSpec, n_vocab: int, n_ff: int, n_head_kv: int) -> None:
    import gguf

    w.add_name(f"pytest-llm-latency random {spec.name}")
    w.add_context_length(spec.n_ctx)
    w.add_embedding_length(spec.n_embd)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)


def write_attention_gguf(spec: AttentionSpec, path: Path) -> None:
    """Write ``spec`` to ``path`` (``make_models.ensure_model`` makes it atomic)."""
    import gguf

    from tests.realserver.make_models import WEIGHT_STD, add_embeddings, add_vocab, build_vocab

    pieces, types, allowed = build_vocab()
    rng = np.random.default_rng(spec.seed)
    e = spec.n_embd

    def rand(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * WEIGHT_STD).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    def silent_rows(a: np.ndarray) -> np.ndarray:
        a[..., 0, :] = 0.0  # row 0 of an output projection: the layer never writes hidden dim 0
        return a

    w = gguf.GGUFWriter(str(path), spec.arch)
    if isinstance(spec, SlidingSpec):
        _common(w, spec, len(pieces), spec.n_ff, spec.n_head)
        w.add_key_length(spec.head_dim)
        w.add_value_length(spec.head_dim)
        w.add_sliding_window(spec.window)
        w.add_sliding_window_pattern(spec.pattern)
    elif isinstance(spec, MoESpec):
        _common(w, spec, len(pieces), spec.n_ff_exp, spec.n_head)
        w.add_key_length(spec.head_dim)
        w.add_value_length(spec.head_dim)
        w.add_expert_count(spec.n_expert)
        w.add_expert_used_count(spec.n_expert_used)
        w.add_expert_feed_forward_length(spec.n_ff_exp)
    else:
        # as convert_hf_to_gguf.py (conversion/deepseek.py) writes MLA: one KV head of the latent
        _common(w, spec, len(pieces), spec.n_ff, 1)
        w.add_key_length(spec.kv_lora_rank + spec.qk_rope)
        w.add_value_length(spec.kv_lora_rank)
        w.add_key_length_mla(spec.qk_nope + spec.qk_rope)
        w.add_value_length_mla(spec.v_head)
        w.add_kv_lora_rank(spec.kv_lora_rank)
        w.add_q_lora_rank(0)  # no q LoRA: attn_q
        w.add_rope_dimension_count(spec.qk_rope)
        w.add_leading_dense_block_count(spec.n_layer)  # a dense FFN in every layer
        w.add_expert_feed_forward_length(spec.n_ff)
        w.add_expert_shared_count(0)
    add_vocab(w, pieces, types)
    add_embeddings(w, rand, e, allowed)
    for i in range(spec.n_layer):
        blk = f"blk.{i}"
        w.add_tensor(f"{blk}.attn_norm.weight", ones(e))
        if isinstance(spec, MLASpec):
            h, r = spec.n_head, spec.kv_lora_rank
            w.add_tensor(f"{blk}.attn_q.weight", rand(h * (spec.qk_nope + spec.qk_rope), e))
            w.add_tensor(f"{blk}.attn_kv_a_mqa.weight", rand(r + spec.qk_rope, e))
            w.add_tensor(f"{blk}.attn_kv_a_norm.weight", ones(r))
            w.add_tensor(f"{blk}.attn_k_b.weight", rand(h, r, spec.qk_nope))  # ggml ne {nope, rank, heads}
            w.add_tensor(f"{blk}.attn_v_b.weight", rand(h, spec.v_head, r))  # ggml ne {rank, v, heads}
            w.add_tensor(f"{blk}.attn_output.weight", silent_rows(rand(e, h * spec.v_head)))
        else:
            hd, nh = spec.head_dim, spec.n_head
            w.add_tensor(f"{blk}.attn_q.weight", rand(nh * hd, e))
            w.add_tensor(f"{blk}.attn_q_norm.weight", ones(hd))
            w.add_tensor(f"{blk}.attn_k.weight", rand(nh * hd, e))
            w.add_tensor(f"{blk}.attn_k_norm.weight", ones(hd))
            w.add_tensor(f"{blk}.attn_v.weight", rand(nh * hd, e))
            w.add_tensor(f"{blk}.attn_output.weight", silent_rows(rand(e, nh * hd)))
        if isinstance(spec, SlidingSpec):
            w.add_tensor(f"{blk}.post_attention_norm.weight", ones(e))
        w.add_tensor(f"{blk}.ffn_norm.weight", ones(e))
        if isinstance(spec, MoESpec):
            x, f = spec.n_expert, spec.n_ff_exp
            w.add_tensor(f"{blk}.ffn_gate_inp.weight", rand(x, e))
            w.add_tensor(f"{blk}.ffn_gate_exps.weight", rand(x, f, e))
            w.add_tensor(f"{blk}.ffn_up_exps.weight", rand(x, f, e))
            w.add_tensor(f"{blk}.ffn_down_exps.weight", silent_rows(rand(x, e, f)))
        else:
            w.add_tensor(f"{blk}.ffn_gate.weight", rand(spec.n_ff, e))
            w.add_tensor(f"{blk}.ffn_up.weight", rand(spec.n_ff, e))
            w.add_tensor(f"{blk}.ffn_down.weight", silent_rows(rand(e, spec.n_ff)))
        if isinstance(spec, SlidingSpec):
            w.add_tensor(f"{blk}.post_ffw_norm.weight", ones(e))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
