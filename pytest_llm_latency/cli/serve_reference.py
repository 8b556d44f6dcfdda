"""``pytest-llm-latency serve-reference``: run the reference server until SIGINT/SIGTERM.

Prints exactly one line on stdout, the base URL (``http://127.0.0.1:PORT``), flushed,
once the socket is listening; everything else goes to stderr.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import signal
import sys

from ..core.errors import ConfigError
from ..targets.reference.config import ReferenceConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for f in dataclasses.fields(ReferenceConfig):
        opt = "--" + f.name.replace("_", "-")
        help_text = f.metadata.get("help", "")
        if f.metadata.get("flag"):
            parser.add_argument(opt, dest=f.name, action=argparse.BooleanOptionalAction,
                                default=f.default, help=help_text)
            continue
        kind = str(f.type)
        conv = int if kind.startswith("int") else float if kind.startswith("float") else str
        shown = "" if f.default is None else f" (default {f.default})"
        parser.add_argument(opt, dest=f.name, type=conv, default=f.default, help=help_text + shown)


def config_from_args(args: argparse.Namespace) -> ReferenceConfig:
    return ReferenceConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ReferenceConfig)
                              if hasattr(args, f.name)})


def describe(config: ReferenceConfig) -> str:
    """One line for humans (stderr): what the server models."""
    phys, hw = config.physics(), config.hardware_spec()
    return (f"reference: {hw.name} serving {config.model_name!r}: single-stream decode "
            f"{phys.single_stream_tok_s(0):.1f} tok/s (bandwidth efficiency {phys.decode_efficiency}, "
            f"MFU {phys.prefill_efficiency}), prefill of 1000 tokens {phys.prefill_seconds(1000) * 1e3:.1f} ms, "
            f"KV pool {config.pool_tokens():,} tokens, max_num_seqs {config.max_num_seqs}, "
            f"prefix caching {'on' if config.prefix_caching else 'off'}, chunked prefill "
            f"{config.batched_tokens() or 'off'}, time_scale {config.time_scale}"
            + (f", fault {config.fault}" if config.fault else "")
            + _describe_speculation(config))


def _describe_speculation(config: ReferenceConfig) -> str:
    spec = config.speculation()
    if spec is None:
        return ""
    drafter = config.drafter()
    return (f", speculative decoding k={spec.tokens} (acceptance {config.spec_acceptance}, expected "
            f"{spec.expected_tokens_per_step():.2f} tokens per full step, drafter "
            f"{drafter.name if drafter else 'reads nothing'})")


async def serve(config: ReferenceConfig, *, out=None) -> None:
    from ..targets.reference.server import ReferenceServer

    server = ReferenceServer(config)
    url = await server.start()
    print(describe(config), file=sys.stderr, flush=True)
    out = out or sys.stdout
    out.write(url + "\n")
    out.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # non-main thread/Windows
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args).validate()
    except ConfigError as e:
        print(f"serve-reference: {e}", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):  # a signal that raced the handler
        asyncio.run(serve(config))
    return 0
