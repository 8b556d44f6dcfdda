"""A GGUF file's per-layer KV layout, as the pinned llama.cpp (llama-cpp-python 0.3.36's vendored
copy) builds its cache from the file's metadata (``src/llama-model.cpp`` ``load_hparams``,
``src/models/<arch>.cpp`` ``load_arch_hparams``, ``src/llama-hparams.cpp``, ``src/llama-kv-cache.cpp``):
per-layer K / V lengths and KV heads, MLA's one latent (K only), each architecture's sliding
pattern (``SWA``), the recurrent layers' F32 state, MTP blocks left out of the trunk's cache.  The
rules, key by key: docs/roofline.md#from-a-gguf-file.

An architecture not listed here is refused (``ConfigError``): it is never counted as full attention.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..core.errors import ConfigError
from ..core.roofline.kv_layout import KVLayout, LayerKV, kv_layout_from_groups

#: llama-cpp-python release whose vendored llama.cpp these rules follow
LLAMA_CPP_PIN = "llama-cpp-python 0.3.36"

#: every attention layer full (plain KV cache; MLA when the file has the MLA keys)
FULL = frozenset({
    "llama", "deci", "falcon", "grok", "gpt2", "gptneox", "mpt", "baichuan", "starcoder", "refact", "bloom",
    "stablelm", "qwen", "qwen2", "qwen2moe", "qwen2vl", "qwen3", "qwen3moe", "qwen3vl", "qwen3vlmoe", "phi2",
    "phi3",  # llama.cpp ignores phi3's sliding_window ("Phi SWA is currently disabled")
    "phimoe", "plamo", "codeshell", "orion", "internlm2", "minicpm", "minicpm3", "gemma", "starcoder2", "xverse",
    "command-r", "dbrx", "olmo", "olmoe", "openelm", "arctic", "deepseek", "deepseek2", "deepseek2-ocr",
    "chatglm", "glm4", "glm4moe", "bitnet", "jais", "jais2", "nemotron", "exaone", "granite", "granitemoe",
    "chameleon", "plm", "bailingmoe", "bailingmoe2", "dots1", "arcee", "ernie4_5", "ernie4_5-moe",
    "hunyuan-moe", "hunyuan-dense", "hunyuan_vl", "hy_v3", "smollm3", "seed_oss", "grovemoe", "apertus",
    "minimax-m2", "pangu-embedded", "mistral3", "mistral4", "maincoder", "cogvlm",
})


@dataclass(frozen=True)
class SwaRule:
    """An architecture's sliding layers (``load_arch_hparams``)."""
    period: int | None            # load_swa_pattern's default n_pattern; None: the per-layer array is required
    dense_first: bool = False     # layer 0 of each period full (else the last one)
    window: int | None = None     # window when the key is absent (None: the key is required)
    optional: bool = False        # SWA only when sliding_window is present and > 0; else all full
    forced_window: int | None = None  # llama.cpp sets this window whatever the file says
    zero_disables: bool = False   # a sliding_window of 0 turns it off (absent: on)
    kind: str = "sliding"


SWA: dict[str, SwaRule] = {
    "gemma2": SwaRule(2, window=4096),
    "gemma3": SwaRule(6, optional=True),
    "gpt-oss": SwaRule(2),
    "cohere2": SwaRule(4),
    "cohere2moe": SwaRule(4, dense_first=True),
    "exaone-moe": SwaRule(4),
    "olmo2": SwaRule(4, optional=True),
    "afmoe": SwaRule(4, optional=True),
    "mellum": SwaRule(4, optional=True),
    "laguna": SwaRule(4, dense_first=True, optional=True),
    "plamo3": SwaRule(8, optional=True),
    "smallthinker": SwaRule(4, dense_first=True, optional=True, forced_window=4096),
    "muse-glimmer": SwaRule(4),
    "granite_swa": SwaRule(None), "maple": SwaRule(None), "mimo2": SwaRule(None), "spark2_5": SwaRule(None),
    "step35": SwaRule(None),
    "llama4": SwaRule(4, forced_window=8192, zero_disables=True, kind="chunked"),
}

#: every layer recurrent (llm_arch_is_recurrent)
RECURRENT = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})

#: hybrids: which layers are recurrent, and which attend (``create_memory``'s filters)
HYBRID = frozenset({"jamba", "granitehybrid", "plamo2", "lfm2", "lfm2moe", "nemotron_h", "nemotron_h_moe",
                    "falcon-h1", "qwen3next", "qwen35", "qwen35moe"})

#: known to the pinned llama.cpp, but their cache is not one of the kinds modelled here
NOT_MODELLED = {
    "gemma3n": "KV shared across layers and per-layer embeddings",
    "gemma4": "KV shared across layers and per-layer embeddings",
    "gemma4-assistant": "KV of another model", "exaone4": "sliding layers only in the 64-layer model",
    "deepseek32": "sparse attention (DSA indexer)", "glm-dsa": "sparse attention (DSA indexer)",
    "minimax-m3": "sparse attention (MSA)", "hy_v4": "sparse attention (indexer)",
    "dots3note": "sparse attention with sliding layers", "deepseek4": "compressed sparse attention",
    "kimi-k3": "hybrid sparse attention", "glm5-next": "hybrid sparse attention",
    "kimi-linear": "KDA linear attention with MLA", "minimax-01": "lightning attention",
    "bailingmoe3": "hybrid linear attention", "qwen4exp": "hybrid sparse attention", "nanbeige": "remapped layers",
    "dflash": "a drafting head", "eagle3": "a drafting head",
}


def _way_out(where: str) -> str:
    return (f"give the KV cache explicitly next to {where}: layers, kv_heads and head_dim "
            "(or kv_bytes_per_token)")


class _Meta:
    """``<arch>.*`` metadata of one file, with errors naming the file and the key."""

    def __init__(self, meta: Mapping, arch: str, where: str):
        self.meta, self.arch, self.where = meta, arch, where

    def key(self, name: str) -> str:
        return f"{self.arch}.{name}"

    def get(self, name: str, default=None):
        v = self.meta.get(self.key(name))
        return default if v is None else v

    def need(self, name: str, why: str):
        v = self.meta.get(self.key(name))
        if v is None:
            raise ConfigError(f"{self.where}: no {self.key(name)} key, which llama.cpp needs for {why}; "
                              f"is the file complete? or {_way_out(self.where)}")
        return v

    def per_layer(self, name: str, n: int, default) -> list[int]:
        """A key that is one number or one per layer (``get_key_or_arr``)."""
        v = self.get(name, default)
        if isinstance(v, (list, tuple)):
            if len(v) != n:
                raise ConfigError(f"{self.where}: {self.key(name)} has {len(v)} entries for {n} layers; "
                                  f"{_way_out(self.where)}")
            return [int(x) for x in v]
        return [int(v)] * n


def _swa_layers(m: _Meta, rule: SwaRule, n_all: int) -> tuple[list[bool], int | None]:
    """(is_swa per layer, window), or all False when this file has no sliding layers."""
    window_key = "attention.sliding_window"
    window = m.get(window_key)
    if (rule.optional and (window is None or int(window) <= 0)) or \
            (rule.zero_disables and window is not None and int(window) == 0):
        return [False] * n_all, None
    if rule.forced_window is not None:
        window = rule.forced_window
    elif window is None:
        window = rule.window if rule.window is not None else m.need(window_key, "its sliding layers' window")
    pattern = m.get("attention.sliding_window_pattern")
    if isinstance(pattern, (list, tuple)):  # get_arr: layers past the array's end are full
        return [bool(pattern[il]) if il < len(pattern) else False for il in range(n_all)], int(window)
    if rule.period is None:
        m.need("attention.sliding_window_pattern", "which of its layers slide (a per-layer array)")
    n = int(pattern) if pattern is not None else int(rule.period or 0)
    if rule.dense_first:
        return [n == 0 or il % n != 0 for il in range(n_all)], int(window)
    return [n == 0 or il % n < n - 1 for il in range(n_all)], int(window)


def _recurrent_layers(m: _Meta, n_layer: int, n_all: int, kv_heads: list[int]) -> tuple[list[bool], list[bool]]:
    """(is_recurrent, attends) per layer of a hybrid or recurrent architecture."""
    arch = m.arch
    trunk = [il < n_layer for il in range(n_all)]
    if arch in RECURRENT:
        return trunk, [False] * n_all
    if arch == "falcon-h1":  # every layer has both an attention and an SSM block
        return trunk, trunk
    if arch in ("nemotron_h", "nemotron_h_moe"):
        ff = m.per_layer("feed_forward_length", n_all, 0)
        recr = [t and kv_heads[il] == 0 and ff[il] == 0 for il, t in enumerate(trunk)]
        return recr, [t and kv_heads[il] > 0 for il, t in enumerate(trunk)]
    if arch in ("qwen3next", "qwen35", "qwen35moe"):
        arr = m.get("attention.recurrent_layers")
        if isinstance(arr, (list, tuple)):
            recr = [bool(x) and t for x, t in zip(arr, trunk)]
        elif arr is not None:  # one value for every layer (llama.cpp's get_key_or_arr)
            recr = [bool(arr) and t for t in trunk]
        else:
            every = int(m.get("full_attention_interval", 4))
            recr = [t and (il + 1) % every != 0 for il, t in enumerate(trunk)]
        return recr, [t and not r for t, r in zip(trunk, recr)]
    recr = [t and kv_heads[il] == 0 for il, t in enumerate(trunk)]  # jamba, granitehybrid, plamo2, lfm2
    return recr, [t and not r for t, r in zip(trunk, recr)]


def _state_elems(m: _Meta, n_embd: int) -> int:
    """``n_embd_r() + n_embd_s()`` (llama-hparams.cpp): a recurrent layer's state, in F32 elements."""
    if m.arch.startswith(("rwkv", "arwkv")):
        head = int(m.need("wkv.head_size", "its RWKV state"))
        return int(m.get("token_shift_count", 2)) * n_embd + n_embd * head
    if m.arch.startswith("lfm2"):
        return n_embd * (int(m.need("shortconv.l_cache", "its short-convolution state")) - 1)
    d_conv = int(m.need("ssm.conv_kernel", "its SSM state"))
    d_inner = int(m.need("ssm.inner_size", "its SSM state"))
    d_state = int(m.need("ssm.state_size", "its SSM state"))
    groups = int(m.get("ssm.group_count", 0))
    return max(d_conv - 1, 0) * (d_inner + 2 * groups * d_state) + d_state * d_inner


def gguf_kv_layout(meta: Mapping, arch: str | None, *, elem_bytes: float, where: str) -> KVLayout:
    """The KV layout one sequence's decode step reads, from a GGUF file's metadata (``{key: value}``,
    arrays as lists).  ``elem_bytes``: the KV cache's bytes per element (f16: 2); recurrent state is
    F32 in llama.cpp whatever the KV type.  ``where`` names the file in errors."""
    if not arch:
        raise ConfigError(f"{where}: no general.architecture key, so its attention layout is unknown; "
                          f"{_way_out(where)}")
    m = _Meta(meta, arch, where)
    if arch in NOT_MODELLED:
        raise ConfigError(f"{where}: architecture {arch!r} ({NOT_MODELLED[arch]}) is not modelled; its KV cache "
                          f"is not counted as full attention: {_way_out(where)}")
    if arch not in FULL and arch not in SWA and arch not in RECURRENT and arch not in HYBRID:
        raise ConfigError(f"{where}: architecture {arch!r} is not known to the GGUF reader (it follows "
                          f"{LLAMA_CPP_PIN}'s llama.cpp), so which of its layers attend, slide or recur is unknown "
                          f"and it is not counted as full attention: {_way_out(where)}")
    n_all = int(m.need("block_count", "its layer count"))
    n_layer = n_all - int(m.get("nextn_predict_layers", 0))  # MTP blocks: not in the trunk's cache
    n_embd = int(m.need("embedding_length", "its head size"))
    heads = m.per_layer("attention.head_count", n_all, 0)
    kv_heads = m.per_layer("attention.head_count_kv", n_all, 0) if m.get("attention.head_count_kv") is not None \
        else list(heads)
    if arch in RECURRENT or arch in HYBRID:
        recr, attends = _recurrent_layers(m, n_layer, n_all, kv_heads)
    else:
        recr, attends = [False] * n_all, [il < n_layer for il in range(n_all)]
    is_swa, window = [False] * n_all, None
    rule = SWA.get(arch)
    if rule is not None:
        is_swa, window = _swa_layers(m, rule, n_all)
    elif arch.startswith("lfm2") and int(m.get("attention.sliding_window", 0)) > 0:
        is_swa, window = [not r for r in recr], int(m.get("attention.sliding_window"))
    groups: list[LayerKV] = []
    if any(attends):
        if not heads[0]:  # llama.cpp derives every head size from layer 0's head count
            raise ConfigError(f"{where}: {m.key('attention.head_count')} of layer 0 is {heads[0]}, so llama.cpp's "
                              f"head sizes are unknown; {_way_out(where)}")
        k_full = int(m.get("attention.key_length", n_embd // heads[0]))
        v_full = int(m.get("attention.value_length", n_embd // heads[0]))
        k_swa = int(m.get("attention.key_length_swa", k_full))
        v_swa = int(m.get("attention.value_length_swa", v_full))
        mla = m.get("attention.key_length_mla") is not None and m.get("attention.value_length_mla") is not None
        for il in range(n_all):
            if not attends[il] or kv_heads[il] == 0:
                continue
            k, v = (k_swa, v_swa) if is_swa[il] else (k_full, v_full)
            per_token = kv_heads[il] * (k + (0 if mla else v)) * elem_bytes
            kind = (rule.kind if rule else "sliding") if is_swa[il] else "latent" if mla else "full"
            groups.append(LayerKV(kind, 1, per_token, window=window if is_swa[il] else None))
    if any(recr):
        state = 4.0 * _state_elems(m, n_embd)
        groups.extend(LayerKV("state", 1, state_bytes=state) for r in recr if r)
    if not groups:
        raise ConfigError(f"{where}: {arch!r} metadata gives no layer with a KV cache or state "
                          f"(block_count {n_all}, head_count_kv {kv_heads[:4]}...); {_way_out(where)}")
    return kv_layout_from_groups(groups, source=f"{where}: {arch} layer kinds as {LLAMA_CPP_PIN}'s llama.cpp")

