"""`pytest-llm-latency ceiling`."""
import json

import pytest

from pytest_llm_latency.cli import main as cli
from pytest_llm_latency.cli import ceiling as roofline_cli
from pytest_llm_latency.roofline import resolve

# The seed article's table: 8e9 params at 16 bits (16 GB), published bandwidth -> decode ceiling.
SEED_TABLE = [("cpu", 6), ("a10g", 38), ("l40s", 54), ("rtx-4090", 63), ("a100-80gb-sxm", 127), ("h100-sxm", 209)]


def run_cli(argv, capsys):
    """Through the real dispatcher, with only our subcommand registered."""
    code = cli.main(["ceiling", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(autouse=True)
def only_ceiling(monkeypatch):
    monkeypatch.setattr(cli, "SUBCOMMANDS", {"ceiling": cli.SUBCOMMANDS["ceiling"]})


@pytest.mark.parametrize("hardware, expected", SEED_TABLE)
def test_seed_table(hardware, expected, capsys):
    code, out, _ = run_cli(["--hardware", hardware, "--params", "8e9", "--dtype", "fp16", "--context", "0",
                            "--json"], capsys)
    assert code == 0
    assert round(json.loads(out)["ceiling_tok_s"]) == expected
    # a tiny context (16 tokens of Llama-3-8B KV, 2 MB) lowers it by ~0.013%
    _, tiny, _ = run_cli(["--hardware", hardware, "--params", "8e9", "--dtype", "fp16", "--context", "16",
                          "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--json"], capsys)
    assert json.loads(tiny)["ceiling_tok_s"] == pytest.approx(json.loads(out)["ceiling_tok_s"], rel=2e-4)
    assert json.loads(tiny)["ceiling_tok_s"] < json.loads(out)["ceiling_tok_s"]


def test_text_output_shows_the_arithmetic(capsys):
    code, out, _ = run_cli(["--hardware", "h100-sxm", "--params", "8B", "--dtype", "fp16"], capsys)
    assert code == 0
    assert out.splitlines()[0] == "decode ceiling 209.4 tok/s per stream"
    assert "H100-SXM 3350 GB/s ÷ (16.00 GB weights, KV not counted)" in out
    assert "NVIDIA H100 datasheet" in out and "prefill ceiling" in out


def test_quantization_doubles_the_ceiling(capsys):
    _, fp16, _ = run_cli(["--hardware", "l40s", "--params", "8e9", "--dtype", "fp16", "--json"], capsys)
    _, int8, _ = run_cli(["--hardware", "l40s", "--params", "8e9", "--bits", "8", "--json"], capsys)
    assert json.loads(int8)["ceiling_tok_s"] == pytest.approx(2 * json.loads(fp16)["ceiling_tok_s"])


def test_context_batch_and_kv_dtype(capsys):
    args = ["--hardware", "h100-sxm", "--model", "llama-3.1-8b", "--context", "8000", "--batch", "4", "--json"]
    _, out, _ = run_cli(args, capsys)
    d = json.loads(out)
    assert d["kv_bytes_per_token"] == 131072
    assert d["step_bytes"] == pytest.approx(16.06e9 + 4 * 131072 * 8000)
    assert d["aggregate_tok_s"] == pytest.approx(4 * d["ceiling_tok_s"])
    _, out8, _ = run_cli(args + ["--kv-dtype", "fp8"], capsys)
    assert json.loads(out8)["step_bytes"] == pytest.approx(16.06e9 + 4 * 65536 * 8000)


def test_config_file(tmp_path, capsys):
    from tests.unit.core.roofline.test_modelbytes import LLAMA_31_8B
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_31_8B))
    code, out, _ = run_cli(["--hardware", "l40s", "--config", str(tmp_path / "config.json"), "--context", "8000"],
                           capsys)
    assert code == 0 and "131,072 B/token" in out and "1.05 GB per sequence at 8000 ctx" in out


def test_tensor_parallel_flag(capsys):
    _, out, _ = run_cli(["--hardware", "h100-sxm", "--tp", "2", "--params", "8e9", "--dtype", "fp16", "--json"],
                        capsys)
    d = json.loads(out)
    assert d["mem_bandwidth_gb_s"] == 6700 and round(d["ceiling_tok_s"]) == 419


def test_explicit_bandwidth(capsys):
    _, out, _ = run_cli(["--bandwidth", "160", "--params", "8e9", "--dtype", "fp16", "--json"], capsys)
    assert json.loads(out)["ceiling_tok_s"] == pytest.approx(10.0)


def test_hardware_all_table_lists_every_device(capsys):
    from pytest_llm_latency.roofline import catalog
    code, out, _ = run_cli(["--hardware", "all", "--params", "8e9", "--dtype", "fp16"], capsys)
    assert code == 0
    for key, expected in SEED_TABLE:
        row = next(line for line in out.splitlines() if line.startswith(catalog.hardware(key).key + " "))
        assert round(float(row.split()[2])) == expected
    assert all(key in out for key in catalog.all_hardware())
    code, out, _ = run_cli(["--hardware", "all", "--params", "8e9", "--dtype", "fp16", "--json"], capsys)
    assert len(json.loads(out)) == len(catalog.all_hardware())


@pytest.mark.parametrize("argv, needle", [
    (["--hardware", "h100-sx", "--params", "8e9", "--dtype", "fp16"],
     "--hardware: unknown hardware 'h100-sx'; did you mean h100-sxm"),
    (["--params", "8e9", "--dtype", "fp16"], "--hardware: no hardware given"),
    (["--hardware", "h100", "--params", "8e9"], "--params needs --dtype"),
    (["--hardware", "h100", "--params", "8e9", "--dtype", "q4km"],
     "--dtype: unknown dtype 'q4km'; did you mean Q4_K_M"),
    (["--hardware", "h100", "--dtype", "fp16"], "give exactly one of --model"),
    (["--hardware", "h100", "--params", "8e9", "--dtype", "fp16", "--context", "100"], "--head-dim"),
    (["--hardware", "h100", "--params", "8e9", "--dtype", "fp16", "--layers", "32"], "missing kv_heads, head_dim"),
    (["--hardware", "h100", "--model", "llama-9"], "unknown model 'llama-9'"),
    (["--hardware", "h100", "--bandwidth", "100", "--params", "8e9", "--dtype", "fp16"], "not both"),
    (["--hardware", "h100", "--gguf", "/nonexistent.gguf"], "no such file"),
])
def test_bad_input_exits_2_naming_the_flag(argv, needle, capsys):
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == ""
    assert needle in err and err.startswith("pytest-llm-latency ceiling: error:")


@pytest.mark.parametrize("argv, needle", [
    (["--params", "abc"], "argument --params: expected a positive number like 8e9 or 8B"),
    (["--batch", "0"], "argument --batch: expected a positive int"),
    (["--context", "-5"], "argument --context: expected a number of tokens >= 0"),
    (["--bits", "x"], "argument --bits"),
])
def test_malformed_numbers_exit_2_from_argparse(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["ceiling", "--hardware", "h100", *argv])
    assert exc.value.code == 2 and needle in capsys.readouterr().err


def test_module_main_without_the_dispatcher(capsys):
    assert roofline_cli.main(["--hardware", "t4", "--params", "1e9", "--dtype", "int4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ceiling_tok_s"] == pytest.approx(640.0)


def test_gguf_file(tmp_path, capsys):
    pytest.importorskip("gguf")
    from tests.unit.roofline.test_roofline_gguf import HEADS, HIDDEN, KV_HEADS, LAYERS, VOCAB, write_gguf
    path = tmp_path / "m.gguf"
    expected = write_gguf(path)
    code, out, _ = run_cli(["--bandwidth", "100", "--gguf", str(path), "--context", "10", "--json"], capsys)
    d = json.loads(out)
    # untied input embedding (Q8_0, 34 B per 32 weights): one of its VOCAB rows is read
    assert code == 0 and d["weight_bytes"] == expected["bytes"] - (VOCAB - 1) * HIDDEN // 32 * 34
    assert d["kv_bytes_per_token"] == 2 * LAYERS * KV_HEADS * (HIDDEN // HEADS) * 2
    code, _, err = run_cli(["--bandwidth", "100", "--gguf", str(path), "--dtype", "fp16"], capsys)
    assert code == 2 and "--gguf: the file's tensor table gives the bytes" in err


def test_roofline_inputs_from_a_yaml_mapping(tmp_path):
    from pytest_llm_latency.core.errors import ConfigError
    from tests.unit.core.roofline.test_modelbytes import LLAMA_31_8B
    hw, mb = resolve.roofline_inputs({"hardware": "NVIDIA L40S", "model": "llama-3.1-8b", "min_decode_efficiency": 0.5,
                                           "batch": 4})
    assert hw.mem_bandwidth_gb_s == 864 and mb.weight_bytes == pytest.approx(16.06e9)
    hw, mb = resolve.roofline_inputs({"mem_bandwidth_gb_s": 100, "tensor_parallel": 2, "params": 1e9,
                                           "dtype": "Q8_0", "layers": 2, "kv_heads": 2, "head_dim": 64})
    assert hw.mem_bandwidth_gb_s == 200 and mb.weight_bytes == pytest.approx(1.0625e9)
    assert mb.kv_bytes_per_token == 2 * 2 * 2 * 64 * 2
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_31_8B))
    _, mb = resolve.roofline_inputs({"hardware": "h100", "config": "config.json", "kv_dtype": "fp8"},
                                         base_dir=tmp_path)
    assert mb.total_params == pytest.approx(8.03e9, rel=0.01) and mb.kv_bytes_per_token == 65536
    hw, mb = resolve.roofline_inputs({"hardware": "auto", "tensor_parallel": 2, "model_bytes": 4.9e9},
                                          runner=lambda argv: "NVIDIA H200, 143771 MiB\nNVIDIA H200, 143771 MiB\n")
    assert hw.mem_bandwidth_gb_s == 9600 and mb.weight_bytes == 4.9e9 and mb.kv_bytes_per_token is None
    with pytest.raises(ConfigError, match=r"roofline.kv_head: unknown key; did you mean kv_heads\?"):
        resolve.roofline_inputs({"hardware": "h100", "model": "llama-3.1-8b", "kv_head": 8})
    with pytest.raises(ConfigError, match=r"roofline.params needs roofline.dtype"):
        resolve.roofline_inputs({"hardware": "h100", "params": 8e9})
    with pytest.raises(ConfigError, match=r"w.hardware: unknown hardware 'h100-sx'"):
        resolve.roofline_inputs({"hardware": "h100-sx", "model": "llama-3.1-8b"}, where="w")
    with pytest.raises(ConfigError, match=r"roofline.model_bytes is already in bytes"):
        resolve.roofline_inputs({"hardware": "h100", "model_bytes": 1e9, "dtype": "fp16"})


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_a_closed_pipe_ends_the_command_quietly(extra):
    """``pytest-llm-latency ceiling --hardware all ... | head -2``: the reader is gone before the
    output is written (its read end is closed before the child has even started Python), so the
    write fails with EPIPE every time; the command ends with 141 (128 + SIGPIPE) and no traceback."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "pytest_llm_latency.cli", "ceiling", "--hardware", "all",
                             "--params", "8e9", "--dtype", "fp16", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err


def test_prefill_ceiling_beside_the_decode_one(capsys):
    code, out, _ = run_cli(["--hardware", "h100-sxm", "--params", "8e9", "--dtype", "bf16", "--layers", "32",
                            "--kv-heads", "8", "--head-dim", "128", "--hidden-size", "4096", "--prompt-tokens", "2000"],
                           capsys)
    assert code == 0
    flops = 2 * 8e9 * 2000 + 2 * 32 * 4096 * 2000 * 2001  # 2·P·n + 2·L·W·n(n+1)
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("prefill ceiling"))
    assert lines[head] == (f"prefill ceiling {2000 * 989e12 / flops:,.0f} tok/s, {1000 * flops / 989e12:.4g} ms "
                           "for 2000 prompt tokens (compute-bound, MFU 1)")
    assert lines[head + 1] == f"  = H100-SXM 989 TFLOPS ÷ {flops / 2000 / 1e9:.4g} GFLOP/token"
    assert "2 × 32 layers × 4096 × 2000 × 2001" in lines[head + 2]


def test_prefill_ceiling_uses_the_dtype_figure_and_says_when_none_is_known(capsys):
    _, out, _ = run_cli(["--hardware", "h100-sxm", "--params", "8e9", "--dtype", "fp8", "--json"], capsys)
    pre = json.loads(out)["prefill"]
    assert pre["peak_tflops"] == 1979 and pre["ms"] == pytest.approx(1000 * 2 * 8e9 * 1024 / 1979e12)
    _, out, _ = run_cli(["--hardware", "v100", "--params", "8e9", "--dtype", "fp16"], capsys)
    assert "prefill ceiling: unknown: no peak FLOP/s for V100" in out
    _, out, _ = run_cli(["--hardware", "v100", "--params", "8e9", "--dtype", "fp16", "--peak-tflops", "125",
                         "--json"], capsys)
    assert json.loads(out)["prefill"]["tok_s"] == pytest.approx(125e12 / 16e9)


def test_local_gpu_prints_the_measured_ceiling_beside_the_datasheet(monkeypatch, tmp_path, capsys):
    """nvidia-smi and the probe worker injected: the H200 row's 4,243 GB/s read beside its 4,800."""
    from pytest_llm_latency.roofline import gpu_probe, hwdetect

    monkeypatch.setenv("LLM_LATENCY_CACHE", str(tmp_path))
    monkeypatch.setattr(hwdetect, "_default_runner", lambda argv: "name, memory.total [MiB]\nNVIDIA H200, 143771 MiB\n")
    calls = []
    monkeypatch.setattr(gpu_probe, "worker_measure", lambda device, runs: calls.append(device) or {
        "backend": "torch", "device_name": "NVIDIA H200", "buffer_bytes": 8 << 30,
        "read_runs_gb_s": [4200.0, 4243.0, 4230.0], "copy_gb_s": 4280.0})
    argv = ["--hardware", "local-gpu", "--params", "8e9", "--dtype", "bf16", "--context", "0"]
    code, out, _ = run_cli(argv, capsys)
    assert code == 0 and calls == [0]
    assert "decode ceiling 300.0 tok/s" in out  # 4,800 GB/s / 16 GB
    assert "measured: 265.2 tok/s at the 4,243 GB/s this device reads (0.88 of the datasheet)" in out
    code, out, _ = run_cli([*argv, "--json"], capsys)
    d = json.loads(out)
    assert calls == [0], "the second run reads the cached figure"
    assert (d["mem_bandwidth_gb_s"], d["measured_gb_s"]) == (4800, 4243.0)
    assert d["measured_ceiling_tok_s"] == pytest.approx(4243 / 16)
    assert d["measured_of_datasheet"] == pytest.approx(4243 / 4800)
