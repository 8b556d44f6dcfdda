"""The GPU read-bandwidth probe's worker (``roofline.gpu_probe``): run as its own process,
``python -m pytest_llm_latency.roofline.gpu_probe_worker --device 0 --runs 5``; prints one JSON
line.  PyTorch first, else CuPy; neither: ``{"error": ...}`` naming the extra to install."""
from __future__ import annotations

import argparse
import json


def _size(free: int, l2: int) -> int:
    from .gpu_probe import FREE_SHARE, L2_MULTIPLE, MAX_BUFFER_BYTES, MIN_BUFFER_BYTES

    size = int(min(MAX_BUFFER_BYTES, free * FREE_SHARE)) // (1 << 20) * (1 << 20)
    floor = max(MIN_BUFFER_BYTES, L2_MULTIPLE * l2)
    if size < floor:
        raise RuntimeError(f"only {free / 1e9:.2f} GB of GPU memory is free: a buffer of {size / 1e9:.2f} GB is "
                           f"below {floor / 1e9:.2f} GB ({L2_MULTIPLE} x the {l2 / 1e6:.0f} MB L2 cache), so it "
                           "would measure the cache, not HBM; probe while the server is stopped (the figure is "
                           "cached per host and device) or name the hardware (hardware: auto)")
    return size


def _torch(device: int, runs: int, passes: int) -> dict:
    import torch  # type: ignore[import-not-found,unused-ignore]

    if not torch.cuda.is_available():
        raise RuntimeError("PyTorch sees no CUDA device")
    dev = torch.device("cuda", device)
    free, _ = torch.cuda.mem_get_info(dev)
    props = torch.cuda.get_device_properties(dev)
    size = _size(free, int(getattr(props, "L2_cache_size", 0) or 0))
    buf = torch.ones(size // 4, dtype=torch.float32, device=dev)
    buf.sum()
    torch.cuda.synchronize(dev)
    reads = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(passes):
            buf.sum()
        end.record()
        end.synchronize()
        reads.append(buf.numel() * 4 * passes / (start.elapsed_time(end) / 1e3) / 1e9)
    half = buf.numel() // 2
    src, dst = buf[:half], buf[half:2 * half]
    dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(passes):
        dst.copy_(src)
    end.record()
    end.synchronize()
    copy = 2 * half * 4 * passes / (start.elapsed_time(end) / 1e3) / 1e9
    return {"backend": "torch", "device_name": props.name, "buffer_bytes": buf.numel() * 4,
            "read_runs_gb_s": reads, "copy_gb_s": copy}


def _cupy(device: int, runs: int, passes: int) -> dict:
    import cupy  # type: ignore[import-not-found,unused-ignore]

    with cupy.cuda.Device(device):
        free, _ = cupy.cuda.runtime.memGetInfo()
        props = cupy.cuda.runtime.getDeviceProperties(device)
        size = _size(free, int(props.get("l2CacheSize", 0)))
        buf = cupy.ones(size // 4, dtype=cupy.float32)
        buf.sum()
        cupy.cuda.Device(device).synchronize()
        reads = []
        for _ in range(runs):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            for _ in range(passes):
                buf.sum()
            end.record()
            end.synchronize()
            reads.append(buf.size * 4 * passes / (cupy.cuda.get_elapsed_time(start, end) / 1e3) / 1e9)
        name = props.get("name", b"GPU")
        return {"backend": "cupy", "device_name": name.decode() if isinstance(name, bytes) else str(name),
                "buffer_bytes": buf.size * 4, "read_runs_gb_s": reads, "copy_gb_s": None}


def main(argv: list[str] | None = None) -> int:
    import importlib.util

    from .gpu_probe import EXTRA

    p = argparse.ArgumentParser(prog="gpu_probe_worker")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--passes", type=int, default=4)
    a = p.parse_args(argv)
    try:
        if importlib.util.find_spec("torch") is not None:
            out = _torch(a.device, a.runs, a.passes)
        elif importlib.util.find_spec("cupy") is not None:
            out = _cupy(a.device, a.runs, a.passes)
        else:
            out = {"error": f"the GPU probe needs PyTorch or CuPy and neither is importable here: {EXTRA}; or "
                            "name the hardware (hardware: auto) and set the floor against the datasheet"}
    except Exception as exc:  # the worker's one line says what went wrong; the parent raises it
        out = {"error": f"the GPU bandwidth probe failed: {type(exc).__name__}: {exc}"}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
