"""The GPU tier's server: ``engine.DecodeEngine`` behind the OpenAI completions streaming API.

What the plugin's ``openai-completions`` adapter and its prompt preparation use, in vLLM's
shapes (``pytest_llm_latency/client/apis/openai.py``, ``client/prepare/tokens.py``):

* ``POST /v1/completions`` with ``stream: true``: one SSE ``data: {...}`` chunk per token
  (``choices[0].text``; the running ``usage`` on every chunk when
  ``stream_options.continuous_usage_stats`` is asked), ``finish_reason: "length"`` on the
  last token, a ``choices: []`` chunk with ``usage`` (``prompt_tokens``, ``completion_tokens``)
  when ``include_usage`` is asked, then ``data: [DONE]``.  Exactly ``max_tokens`` tokens are
  generated (the engine has no EOS); without ``stream`` one JSON body;
* ``POST /tokenize`` and ``/v1/tokenize`` (vLLM ``{model, prompt}`` -> ``{count, tokens,
  max_model_len}``, llama.cpp ``{content}`` -> ``{tokens}``): the plugin fits prompts to an
  exact length on it, then checks ``usage.prompt_tokens``;
* ``GET /v1/models`` (``max_model_len`` = the engine's positions), ``GET /health``;
* ``GET /metrics``: the gauges ``vllm:num_requests_running`` and ``vllm:num_requests_waiting``
  (``core/measure/server_model.py``'s names), so a diagnosis sees the batch the engine ran;
* ``GET /engine/stats``: the engine (mode, dtype, config) and every served request's own
  timing (``Generation``), for the tests to compare with the plugin's figures.

Tokenizer: the embedded reference target's (``targets/reference/tokenizer.py``): one token
per whitespace-separated word, id ``crc32(word) % 128256`` (taken modulo the engine's
vocabulary).  A generated token is sent as one word (``" " + WORDS[id % len(WORDS)]``), so an
output of N tokens is N words and re-tokenizes to N tokens.

One request at a time (a lock): the engine has batch 1.  Run as a script
(``python tests/gpu/server.py --port 8000 --mode graphs --dtype bf16``): the engine is built,
captured and warmed up before the port answers.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

try:  # imported as tests.gpu.server
    from .engine import LLAMA_CONFIG, DecodeEngine, model_config, tiny_config
except ImportError:  # run as a script: python tests/gpu/server.py
    from engine import LLAMA_CONFIG, DecodeEngine, model_config, tiny_config  # type: ignore[no-redef]

from pytest_llm_latency.targets.reference import tokenizer

MODEL_NAME = "gpu-tier-llama"
MAX_BODY = 16 * 1024 * 1024
WARMUP_REQUESTS = 2


class EngineService:
    """The engine, its lock and what it served: everything the HTTP handlers share."""

    def __init__(self, engine: DecodeEngine, model: str = MODEL_NAME):
        self.engine, self.model = engine, model
        self.lock = threading.Lock()
        self.count_lock = threading.Lock()
        self.running = 0
        self.waiting = 0
        self.served: list[dict] = []

    def warm_up(self, n: int = WARMUP_REQUESTS) -> None:
        """Prefill and decode at about the tests' lengths, so the first measured request pays
        for no allocation or kernel choice."""
        prompt = list(range(1, min(512, self.engine.max_len // 2) + 1))
        for _ in range(n):
            self.engine.generate(prompt, min(16, self.engine.max_len - len(prompt)))

    def generate(self, prompt_ids: list[int], max_tokens: int, on_token) -> dict:
        with self.count_lock:
            self.waiting += 1
        with self.lock:
            with self.count_lock:
                self.waiting -= 1
                self.running += 1
            try:
                gen = self.engine.generate(prompt_ids, max_tokens, on_token)
            finally:
                with self.count_lock:
                    self.running -= 1
        entry = {"prompt_tokens": len(prompt_ids), "completion_tokens": len(gen.tokens),
                 "prefill_ms": gen.prefill_ms, "step_ms": gen.step_ms, "t_first_ns": gen.t_first_ns,
                 "t_last_ns": gen.t_last_ns}
        self.served.append(entry)
        return {"tokens": gen.tokens, **entry}

    def metrics(self) -> bytes:
        label = f'{{model_name="{self.model}"}}'
        lines = []
        for name, doc, value in (("vllm:num_requests_running", "Number of requests in model execution batches.",
                                  self.running),
                                 ("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                                  self.waiting)):
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} gauge", f"{name}{label} {float(value)}"]
        return ("\n".join(lines) + "\n").encode()


def token_text(token_id: int) -> str:
    return " " + tokenizer.WORDS[token_id % len(tokenizer.WORDS)]


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"     # keep-alive; streams are sent chunked
    disable_nagle_algorithm = True    # every token's chunk leaves at once
    service: EngineService            # set on the subclass ``make_server`` builds
    server_version = "gpu-tier-engine"

    def log_message(self, format: str, *args) -> None:
        pass  # quiet: the engine's log is its errors

    # -- plumbing --------------------------------------------------------------------------
    def _json_body(self) -> dict:
        n = int(self.headers.get("content-length") or 0)
        if n > MAX_BODY:
            self.close_connection = True  # the body is left unread: this connection cannot go on
            raise BadRequest(413, "request body too large")
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            raise BadRequest(400, "request body is not JSON") from None
        if not isinstance(body, dict):
            raise BadRequest(400, "request body must be a JSON object")
        return body

    def _send(self, status: int, obj, content_type: str = "application/json") -> None:
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        kind = "NotFoundError" if status == 404 else "BadRequestError"
        self._send(status, {"object": "error", "message": message, "type": kind, "param": None, "code": status})

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def do_GET(self) -> None:  # http.server's names
        s, path = self.service, self.path.split("?", 1)[0]
        if path == "/health":
            self._send(200, {"status": "ok"})
        elif path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": s.model, "object": "model", "created": 0,
                                                          "owned_by": "tests/gpu", "root": s.model,
                                                          "max_model_len": s.engine.max_len}]})
        elif path == "/metrics":
            self._send(200, s.metrics(), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/engine/stats":
            self._send(200, {"engine": s.engine.describe(), "served": list(s.served)})
        else:
            self._error(404, f"no route GET {path}")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            body = self._json_body()
            if path in ("/tokenize", "/v1/tokenize"):
                self._tokenize(body)
            elif path == "/v1/completions":
                self._completions(body)
            else:
                self._error(404, f"no route POST {path}")
        except BadRequest as exc:
            self._error(exc.status, str(exc))

    # -- endpoints -------------------------------------------------------------------------
    def _check_model(self, body: dict) -> None:
        name = body.get("model")
        if name is not None and name != self.service.model:
            raise BadRequest(404, f"The model `{name}` does not exist.")

    def _tokenize(self, body: dict) -> None:
        if "content" in body and "prompt" not in body:     # llama.cpp's shape
            if not isinstance(body["content"], str):
                raise BadRequest(400, "content must be a string")
            self._send(200, {"tokens": tokenizer.encode(body["content"])})
            return
        self._check_model(body)
        if not isinstance(body.get("prompt"), str):
            raise BadRequest(400, "tokenize needs prompt (a string) or content")
        ids = tokenizer.encode(body["prompt"])
        self._send(200, {"count": len(ids), "tokens": ids, "max_model_len": self.service.engine.max_len})

    def _completions(self, body: dict) -> None:
        s = self.service
        self._check_model(body)
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise BadRequest(400, "prompt must be a string (or a list of one string)")
        ids = tokenizer.encode(prompt)
        if not ids:
            raise BadRequest(400, "The prompt is empty: the tokenizer found no words.")
        max_tokens = body.get("max_tokens", 16)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise BadRequest(400, f"max_tokens must be an integer >= 1, got {max_tokens!r}")
        if len(ids) + max_tokens > s.engine.max_len:
            raise BadRequest(400, f"This model's maximum context length is {s.engine.max_len} tokens. However, "
                                  f"you requested {len(ids) + max_tokens} tokens ({len(ids)} in the messages, "
                                  f"{max_tokens} in the completion).")
        opts = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
        head = {"id": "cmpl-" + uuid.uuid4().hex, "object": "text_completion", "created": int(time.time()),
                "model": s.model}
        if not body.get("stream"):
            out = s.generate(ids, max_tokens, None)
            self._send(200, {**head, "choices": [{"index": 0, "text": "".join(map(token_text, out["tokens"])),
                                                  "logprobs": None, "finish_reason": "length"}],
                             "usage": usage(len(ids), len(out["tokens"]))})
            return
        self._stream(head, ids, max_tokens, bool(opts.get("include_usage")),
                     bool(opts.get("continuous_usage_stats")))

    def _stream(self, head: dict, ids: list[int], max_tokens: int, include_usage: bool, continuous: bool) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        sent = [0]

        def on_token(token_id: int) -> None:
            sent[0] += 1
            choice = {"index": 0, "text": token_text(token_id), "logprobs": None,
                      "finish_reason": "length" if sent[0] == max_tokens else None}
            event = {**head, "choices": [choice]}
            if continuous:
                event["usage"] = usage(len(ids), sent[0])
            self._chunk(b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n")

        try:
            self.service.generate(ids, max_tokens, on_token)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return                       # the client went away; the engine is ready for the next
        except Exception as exc:         # an engine failure becomes an error event
            err = {"error": {"message": f"engine failed: {type(exc).__name__}: {exc}", "type": "InternalServerError",
                             "code": 500}}
            self._chunk(b"data: " + json.dumps(err).encode() + b"\n\n")
        else:
            if include_usage:
                self._chunk(b"data: " + json.dumps({**head, "choices": [], "usage": usage(len(ids), sent[0])},
                                                   separators=(",", ":")).encode() + b"\n\n")
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")


def usage(prompt: int, completion: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def make_server(service: EngineService, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"service": service})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def serve_in_thread(service: EngineService, host: str = "127.0.0.1", port: int = 0):
    """Start serving on a daemon thread; returns (server, base URL).  ``server.shutdown()`` stops it."""
    server = make_server(service, host, port)
    threading.Thread(target=server.serve_forever, name="gpu-tier-http", daemon=True).start()
    return server, f"http://{host}:{server.server_address[1]}"


def build_engine(args: argparse.Namespace) -> DecodeEngine:
    cfg = tiny_config() if args.tiny else model_config(args.config, layers=args.layers)
    return DecodeEngine(cfg, device=args.device, dtype=args.dtype, mode=args.mode, max_len=args.max_len,
                        seed=args.seed)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mode", choices=("graphs", "eager"), default="graphs")
    p.add_argument("--dtype", choices=("bf16", "fp32", "fp16"), default="bf16")
    p.add_argument("--device", default="cuda")
    p.add_argument("--config", type=Path, default=LLAMA_CONFIG, help="a Hugging Face config.json (Llama family)")
    p.add_argument("--layers", type=int, default=None, help="override num_hidden_layers (same layer shapes)")
    p.add_argument("--tiny", action="store_true", help="the tiny two-layer config (CPU self-checks)")
    p.add_argument("--max-len", type=int, default=1024, help="KV cache positions (prompt + output)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    started = time.monotonic()
    service = EngineService(build_engine(args))
    service.warm_up()
    d = service.engine.describe()
    print(f"engine ready in {time.monotonic() - started:.1f} s: {d['mode']} {d['dtype']} on {d['device_name']}, "
          f"{d['params'] / 1e6:.1f} M params, {d['config']['num_hidden_layers']} layers", flush=True)
    server = make_server(service, args.host, args.port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
