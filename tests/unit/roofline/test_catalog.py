"""The packaged hardware/model catalog."""
import dataclasses

import pytest

from pytest_llm_latency.roofline import catalog
from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.core.roofline.hardware import Hardware, ModelSpec

# The published bandwidths (GB/s), keyed by the catalog key.
PUBLISHED_GB_S = {
    "cpu-ddr5-5600-2ch": 90, "a10g": 600, "l40s": 864, "rtx-4090": 1008, "a100-80gb-sxm": 2039, "h100-sxm": 3350,
    "h100-pcie": 2000, "h100-nvl": 3900, "h200": 4800, "b200": 8000, "a100-40gb": 1555, "l4": 300, "t4": 320,
    "v100": 900, "rtx-3090": 936, "rtx-5090": 1792, "mi300x": 5300, "mi325x": 6000, "apple-m2-ultra": 800,
    "apple-m3-max": 400,
    # issue 34: the accelerators of 2026 (per GPU for the HGX boards and the NVL72 racks)
    "b300": 8000, "gb200": 8000, "gb300": 8000, "h20": 4000, "rtx-pro-6000": 1792, "mi350x": 8000,
    "mi355x": 8000, "gaudi3": 3700, "apple-m3-ultra": 819, "apple-m4-max": 546, "dgx-spark": 273,
    "ryzen-ai-max-395": 256,
}

# Dense bf16 TFLOPS and memory (GB) of the issue 34 entries; None: the vendor publishes no bf16
# tensor figure (Apple, AMD's APU, DGX Spark's only figure is fp4 with sparsity).
PUBLISHED_BF16_AND_GB = {
    "b300": (2250, 288), "gb200": (2500, 186), "gb300": (2500, 288), "h20": (148, 96),
    "rtx-pro-6000": (503.8, 96), "mi350x": (2307, 288), "mi355x": (2517, 288), "gaudi3": (1835, 128),
    "apple-m3-ultra": (None, 512), "apple-m4-max": (None, 128), "dgx-spark": (None, 128),
    "ryzen-ai-max-395": (None, 128), "b200": (2250, 180), "h200": (989, 141),
}

# Below 50 FLOP per byte only where the vendor caps compute on purpose: H20 (export rules), 37.
LOW_FLOP_PER_BYTE = {"h20"}


def test_every_published_device_is_there_with_its_bandwidth():
    table = catalog.all_hardware()
    for key, gb_s in PUBLISHED_GB_S.items():
        assert table[key].mem_bandwidth_gb_s == gb_s, key


def test_the_2026_entries_carry_their_dense_bf16_and_memory_figures():
    table = catalog.all_hardware()
    for key, (tflops, gb) in PUBLISHED_BF16_AND_GB.items():
        assert (table[key].peak_bf16_tflops, table[key].memory_gb) == (tflops, gb), key
    # other dtypes' dense figures: half the vendors' "with sparsity" ones
    assert table["gb200"].peak_tflops("fp8") == (5000, "peak_tflops_by_dtype.fp8")
    assert table["gb300"].peak_tflops("fp4") == (15000, "peak_tflops_by_dtype.fp4")
    assert table["mi355x"].peak_tflops("fp8")[0] == 5033 and table["h20"].peak_tflops("fp8")[0] == 296
    assert table["dgx-spark"].peak_tflops("fp4") == (500, "peak_tflops_by_dtype.fp4")
    assert table["dgx-spark"].peak_tflops("bf16") == (None, "peak_bf16_tflops")
    for key in ("apple-m3-ultra", "apple-m4-max", "ryzen-ai-max-395", "dgx-spark"):
        assert "no bf16 tensor figure published" in table[key].source, key
    for key in ("b300", "gb200", "gb300", "rtx-pro-6000", "dgx-spark"):  # sparse figures halved, and said
        assert "with sparsity" in table[key].source and "halved" in table[key].source, key


def test_every_entry_names_its_source_and_has_sane_figures():
    for key, hw in catalog.all_hardware().items():
        assert len(hw.source) > 10, key
        assert hw.mem_bandwidth_gb_s > 0
        assert hw.peak_bf16_tflops is None or 10 < hw.peak_bf16_tflops < 5000, key
        # a GPU's dense bf16 figure: compute-rich relative to bandwidth (prefill is compute-bound)
        if hw.peak_bf16_tflops:
            flop_per_byte = hw.peak_bf16_tflops * 1e12 / (hw.mem_bandwidth_gb_s * 1e9)
            assert flop_per_byte > (30 if key in LOW_FLOP_PER_BYTE else 50), key


@pytest.mark.parametrize("name, key", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200", "h200"), ("NVIDIA A100-SXM4-40GB", "a100-40gb"), ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"),
    ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"), ("NVIDIA L4", "l4"), ("Tesla T4", "t4"),
    ("Tesla V100-SXM2-32GB", "v100"), ("Tesla V100-PCIE-16GB", "v100"), ("NVIDIA A10G", "a10g"),
    ("NVIDIA L40S", "l40s"), ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("NVIDIA GeForce RTX 3090", "rtx-3090"),
    ("NVIDIA GeForce RTX 5090", "rtx-5090"), ("NVIDIA B200", "b200"), ("AMD Instinct MI300X", "mi300x"),
    ("h100", "h100-sxm"), ("H100-SXM", "h100-sxm"), ("h100 sxm", "h100-sxm"), ("cpu", "cpu-ddr5-5600-2ch"),
    # issue 34: what nvidia-smi / rocm-smi / hl-smi print, and the usual short names
    ("NVIDIA B300 SXM6 AC", "b300"), ("NVIDIA GB200", "gb200"), ("NVIDIA GB300", "gb300"), ("NVIDIA H20", "h20"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000"), ("NVIDIA GB10", "dgx-spark"),
    ("AMD Instinct MI350X", "mi350x"), ("AMD Instinct MI355X", "mi355x"), ("HL-325L", "gaudi3"),
    ("Intel Gaudi 3", "gaudi3"), ("M3 Ultra", "apple-m3-ultra"), ("Apple M4 Max", "apple-m4-max"),
    ("DGX Spark", "dgx-spark"), ("AMD RYZEN AI MAX+ 395 w/ Radeon 8060S", "ryzen-ai-max-395"),
    ("Ryzen AI Max+ 395", "ryzen-ai-max-395"),
])
def test_aliases_and_nvidia_smi_names(name, key):
    assert catalog.hardware(name).key == key


def test_aliases_are_unambiguous():
    seen = {}
    for key, hw in catalog.all_hardware().items():
        for alias in (key, hw.name, *hw.aliases):
            norm = catalog._norm(alias)
            assert seen.setdefault(norm, key) == key, f"{alias!r} names both {seen[norm]} and {key}"


def test_unknown_hardware_suggests_close_matches():
    with pytest.raises(ConfigError, match=r"unknown hardware 'h100-sx'; did you mean h100-sxm"):
        catalog.hardware("h100-sx")
    with pytest.raises(ConfigError, match="known: .*l40s"):
        catalog.hardware("nothing-like-it-zzz")
    with pytest.raises(ConfigError, match=r"^unknown hardware 'nothing-like-it-zzz' \(known: "):  # no empty hint
        catalog.hardware("nothing-like-it-zzz")
    assert catalog.find_hardware("NVIDIA H800") is None
    # the vendor word every nvidia-smi name carries does not make every NVIDIA entry "close"
    assert catalog.close_matches("NVIDIA H800", catalog.all_hardware()) == ["h100-sxm", "h200"]


# Near-twins: each name is its own entry, never its neighbour's.
@pytest.mark.parametrize("name, key", [
    ("h20", "h20"), ("h200", "h200"), ("NVIDIA H20", "h20"), ("NVIDIA H200", "h200"),
    ("b200", "b200"), ("b300", "b300"), ("gb200", "gb200"), ("gb300", "gb300"), ("GB10", "dgx-spark"),
    ("mi300x", "mi300x"), ("mi325x", "mi325x"), ("mi350x", "mi350x"), ("mi355x", "mi355x"),
    ("m3-ultra", "apple-m3-ultra"), ("m3-max", "apple-m3-max"), ("m4-max", "apple-m4-max"),
    ("M2 Ultra", "apple-m2-ultra"), ("rtx-5090", "rtx-5090"), ("rtx-pro-6000", "rtx-pro-6000"),
])
def test_near_twins_resolve_to_themselves(name, key):
    assert catalog.hardware(name).key == key
    assert catalog.find_hardware(name).key == key


# A name close to entries but equal to none is an error naming every close one, and never picks one.
@pytest.mark.parametrize("name, hint", [
    ("h2", "did you mean h20, h200?"),
    ("NVIDIA H20-3e", "did you mean h20, h200?"),  # the 141 GB H20: neither entry's figures
    ("gb20", "did you mean gb200, b200, dgx-spark, gb300?"),
    ("gb30", "did you mean gb300, b300, dgx-spark, gb200?"),
    ("b30", "did you mean b300, gb300?"),
    ("mi355", "did you mean mi355x, mi325x, mi350x?"),
    ("m4-ultra", "did you mean apple-m2-ultra, apple-m3-ultra?"),  # no M4 Ultra: not the M3's figures
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "did you mean rtx-pro-6000?"),
])
def test_a_name_near_entries_is_an_error_naming_all_of_them(name, hint):
    assert catalog.find_hardware(name) is None
    with pytest.raises(ConfigError) as exc:
        catalog.hardware(name)
    assert str(exc.value).startswith(f"unknown hardware {name!r}; {hint} (known: cpu-ddr5-5600-2ch, a10g, ")


def test_close_matches_keep_every_tie_and_cut_only_on_request():
    table = catalog.all_hardware()
    assert catalog.close_matches("mi35x", table)[:3] == ["mi325x", "mi350x", "mi355x"]  # three at 0.91
    assert catalog.close_matches("gb20", table, n=2) == ["gb200", "b200"]
    assert catalog.close_matches("m4 pro", table) == []


def test_nvidia_smi_name_near_two_entries_is_not_detected_as_either():
    from pytest_llm_latency.roofline import hwdetect

    smi = "name, memory.total [MiB]\nNVIDIA H20-3e, 143771 MiB\n"
    with pytest.raises(ConfigError) as exc:
        hwdetect.detect_nvidia(runner=lambda argv: smi)
    msg = str(exc.value)
    assert "'NVIDIA H20-3e', which is not in the hardware catalog. Closest catalog entries: h20, h200." in msg
    assert hwdetect.detect_nvidia(runner=lambda argv: smi.replace("H20-3e, 143771", "H20, 97871")).key == "h20"


def test_existing_keys_and_types_stay_compatible():
    hw = catalog.hardware("h100-sxm")
    assert isinstance(hw, Hardware) and hw.name == "H100-SXM" and hw.bandwidth_bytes_s == 3350e9
    assert hw.peak_bf16_tflops == 989 and hw.memory_gb == 80 and hw.devices == 1
    m = catalog.model("llama-3.1-8b")
    assert isinstance(m, ModelSpec)
    assert (m.params, m.weight_bytes_per_param, m.layers, m.kv_heads, m.head_dim) == (8.03e9, 2.0, 32, 8, 128)
    assert m.weight_bytes == pytest.approx(16.06e9) and m.kv_bytes_per_token == 131072
    assert catalog.model("Llama-3.1-8B") is m
    # positional construction as before still works; new fields have defaults
    ModelSpec("n", 1e9, 2.0, 2, 1, 64)
    names = [f.name for f in dataclasses.fields(ModelSpec)][:9]
    assert names == ["name", "params", "weight_bytes_per_param", "layers", "kv_heads", "head_dim",
                     "kv_bytes_per_elem", "total_params", "max_model_len"]
    assert catalog.DTYPE_BYTES["fp16"] == 2.0


def test_moe_model_entry_and_its_bytes():
    m = catalog.model("mixtral-8x7b")
    mb = m.model_bytes()
    assert mb.weight_bytes == pytest.approx(12.88e9 * 2)
    assert mb.weight_bytes_at_batch(10_000) == pytest.approx(46.70e9 * 2, rel=1e-3)
    with pytest.raises(ConfigError, match="unknown model 'mixtral'; did you mean mixtral-8x7b"):
        catalog.model("mixtral")


def test_custom_hardware():
    hw = catalog.custom_hardware(500)
    assert hw.mem_bandwidth_gb_s == 500 and "explicit" in hw.source and hw.name == "custom 500 GB/s"
    for bad in (0, -3, float("inf"), "500", True):
        with pytest.raises(ConfigError, match="mem_bandwidth_gb_s"):
            catalog.custom_hardware(bad)


def test_bad_entries_are_rejected_with_where(monkeypatch):
    raw = {"devices": {"x": {"mem_bandwidth_gb_s": 100}}}
    monkeypatch.setattr(catalog, "_raw", lambda: raw)
    catalog.all_hardware.cache_clear()
    try:
        with pytest.raises(ConfigError, match="devices.x has no source"):
            catalog.all_hardware()
        raw["devices"]["x"] = {"mem_bandwidth_gb_s": "fast", "source": "a datasheet"}
        with pytest.raises(ConfigError, match="devices.x.mem_bandwidth_gb_s must be a positive number"):
            catalog.all_hardware()
    finally:
        catalog.all_hardware.cache_clear()
