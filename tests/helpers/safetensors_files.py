"""Write small safetensors checkpoints with the ``safetensors`` library (an independent writer), and
read their tensor bytes back with it (an independent reader), for the header reader's tests.

Tensors are zeros; only dtypes and shapes matter.  numpy has no bf16 / fp8, so those are written
through ``safetensors.serialize_file`` with a ``TensorSpec`` of the right dtype over a buffer of
the same width (uint16 / uint8); numpy-native files go through ``safetensors.numpy.save_file``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

#: safetensors dtype -> (numpy buffer type, the name TensorSpec takes)
_BUFFERS = {"BF16": (np.uint16, "bfloat16"), "F16": (np.float16, "float16"), "F32": (np.float32, "float32"),
            "F8_E4M3": (np.uint8, "float8_e4m3fn"), "U8": (np.uint8, "uint8"), "I8": (np.int8, "int8"),
            "I32": (np.int32, "int32")}


def write(path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]]) -> Path:
    """One file of ``{name: (safetensors dtype, shape)}``."""
    from safetensors import TensorSpec, serialize_file

    arrays = {name: np.zeros(shape, dtype=_BUFFERS[dt][0]) for name, (dt, shape) in tensors.items()}
    specs = {name: TensorSpec(dtype=_BUFFERS[dt][1], shape=list(shape), data_ptr=arrays[name].ctypes.data,
                              data_len=arrays[name].nbytes)
             for name, (dt, shape) in tensors.items()}
    serialize_file(specs, str(path))
    return path


def write_numpy(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    from safetensors.numpy import save_file

    save_file(arrays, str(path))
    return path


def file_tensor_bytes(path: Path) -> int:
    """Sum of every tensor's data as the safetensors library reads it (the whole file is read)."""
    from safetensors import deserialize

    return sum(len(entry["data"]) for _, entry in deserialize(Path(path).read_bytes()))


def numpy_tensor_bytes(path: Path) -> int:
    """Sum of ``get_tensor(k).nbytes`` over a numpy-typed file (``safetensors.safe_open``)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="np") as f:
        return sum(f.get_tensor(k).nbytes for k in f.keys())


def write_config(directory: Path, cfg: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(cfg))
    return directory


def raw_file(path: Path, header: bytes, *, length: int | None = None, data: bytes = b"") -> Path:
    """A hand-made file: 8-byte little-endian ``length`` (default: the header's), header, data."""
    n = len(header) if length is None else length
    path.write_bytes(n.to_bytes(8, "little") + header + data)
    return path
