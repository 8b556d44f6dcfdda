"""The reference server: routing, validation, and the non-generation endpoints.

Endpoints: ``POST /v1/completions``, ``POST /v1/chat/completions`` (openai_api.py),
``POST /v1/responses`` and ``/v1/responses/input_tokens`` (responses_api.py), ``POST /v1/messages``
and ``/v1/messages/count_tokens`` (messages_api.py),
``POST /api/generate``, ``POST /api/chat``, ``GET /api/tags``, ``GET /api/ps``,
``GET /api/version`` (ollama_api.py), ``POST /tokenize`` and ``/v1/tokenize`` (vLLM ``{model, prompt}`` or
``{model, messages}`` -> ``{count, tokens, max_model_len}``; llama.cpp ``{content}`` ->
``{tokens}``), ``GET /v1/models``, ``GET /health``, ``GET /metrics``.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import zlib
from collections import OrderedDict

from . import messages_api, ollama_api, openai_api, responses_api, tokenizer
from .answer import Answer
from .config import ReferenceConfig
from .disagg import DisaggPair
from .engine import AdmissionError, block_hashes
from .faults import ENGINE_MODES, HEADER, Fault, parse_fault, status_fault_response
from .http import MAX_HEADER, Connection, Request, serve_connection
from .metrics import CONTENT_TYPE, EngineMetrics
from .openai_api import ApiError
from .residency import Residency
from .scheduler import Scheduler
from .streaming import plan_output, respond_full, stream, watch_disconnect

log = logging.getLogger("pytest_llm_latency.targets.reference")
JSON = [("content-type", "application/json")]
VERSION = "0.1.0-reference"


class ReferenceServer:
    def __init__(self, config: ReferenceConfig):
        self.config = config.validate()
        self.model_name = config.model_name
        self.max_model_len = config.context_length()
        self.model_spec = config.model_spec()
        self.server_fault = parse_fault(config.fault, source="reference fault")
        self.pair: DisaggPair | None = None
        self.scheduler: Scheduler | DisaggPair
        if config.pd_link is not None:  # a prefill/decode pair behind this port (disagg.py)
            self.pair = self.scheduler = DisaggPair(config, self.model_name)
            self.metrics: EngineMetrics | None = None
            self.engine = self.pair.decode.engine
        else:
            self.scheduler = Scheduler.from_config(config, self.model_name)
            self.metrics = self.scheduler.metrics
            self.engine = self.scheduler.engine
        if self.server_fault is not None and self.server_fault.mode in ENGINE_MODES:  # the engine's, not a response's
            self.scheduler.pause = (self.server_fault.seconds("at"), self.server_fault.seconds("seconds"))
            self.server_fault = None
        self.encode = tokenizer.RULES[config.tokenizer]
        self.residency = Residency(config.load_time * config.time_scale, config.keep_alive, config.evict_every)
        self._prompt_cache: OrderedDict[int, None] = OrderedDict()  # Ollama's: the last N prompts
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[asyncio.Task] = set()
        self.port: int | None = None
        self.connections_accepted = 0

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    async def start(self) -> str:
        self.scheduler.start()
        self._server = await asyncio.start_server(self._accept, self.config.host, self.config.port,
                                                  limit=MAX_HEADER, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.url

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        await self.scheduler.stop()
        for task in list(self._conns):
            task.cancel()
        if self._conns:
            await asyncio.wait(self._conns, timeout=2.0)
        if self._server is not None:
            with contextlib.suppress(Exception):  # asyncio.TimeoutError included
                await asyncio.wait_for(self._server.wait_closed(), 2.0)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.server_fault is not None and self.server_fault.mode == "refuse":
            writer.transport.abort()
            return
        self.connections_accepted += 1
        task = asyncio.current_task()
        assert task is not None  # a connection handler runs in its own task
        self._conns.add(task)
        try:
            await serve_connection(reader, writer, self.handle)
        except asyncio.CancelledError:
            writer.transport.abort()
        finally:
            self._conns.discard(task)

    # -- routing --------------------------------------------------------------------------
    async def handle(self, req: Request, conn: Connection) -> None:
        route = ROUTES.get(req.path)
        if route is None:
            await conn.send(404, JSON, b'{"detail":"Not Found"}')
            return
        method, name, *args = route  # args: the generation endpoints' ``chat``
        if req.method != method:
            await conn.send(405, JSON, b'{"detail":"Method Not Allowed"}')
            return
        try:
            await getattr(self, name)(req, conn, *args)
        except ApiError as e:
            if req.path.startswith("/api/"):
                await conn.send(e.status, JSON, json.dumps({"error": e.message}).encode())
            elif req.path.startswith("/v1/messages"):
                await conn.send(e.status, JSON, messages_api.error_body(e.status, e.message))
            else:
                await conn.send(e.status, JSON, e.body())
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception as e:  # pragma: no cover - a bug; answer instead of hanging up
            log.exception("reference server error")
            await conn.send(500, JSON, ApiError(500, f"reference server error: {e!r}",
                                                "InternalServerError").body())

    @staticmethod
    def _json(req: Request) -> dict:
        try:
            body = json.loads(req.body or b"{}")
        except ValueError as e:
            raise ApiError(400, f"request body is not valid JSON: {e}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object")
        return body

    def _fault(self, req: Request) -> Fault | None:
        spec = req.header(HEADER)
        if spec is None:
            return self.server_fault
        try:
            fault = parse_fault(spec, source=f"{HEADER} header")
        except ValueError as e:
            raise ApiError(400, str(e)) from None
        if fault is not None and fault.mode in ENGINE_MODES:
            raise ApiError(400, f"{HEADER}: fault {fault.mode!r} is server-wide only (--fault / ?fault=)")
        return fault

    async def _pre_fault(self, fault: Fault | None, conn: Connection) -> bool:
        """Faults answered before generation; True when the response is done."""
        if fault is not None and fault.mode == "refuse":
            conn.close()
            return True
        canned = None if fault is None else status_fault_response(fault, self.max_model_len)
        if canned is not None:
            await conn.send(*canned)
        return canned is not None

    def _submit(self, ids: list[int], max_tokens: int, *, seed: int | None, ignore_eos: bool = False,
                min_tokens: int = 0, fault: Fault | None = None, stream_interval: int | None = None,
                cached: bool = False, reasoning: int = 0, constrained: bool = False):
        gen = plan_output(len(ids), max_tokens, seed=tokenizer.prompt_seed(ids, seed),
                          ignore_eos=ignore_eos or self.config.ignore_eos, min_tokens=min_tokens, fault=fault,
                          stream_interval=stream_interval or self.config.stream_interval, reasoning=reasoning)
        hashes = block_hashes(ids, self.config.block_size) if self.config.prefix_caching else ()
        slowdown = self.config.constrained_slowdown if constrained else 1.0  # structured output's grammar masks
        try:
            # a prompt from Ollama's prompt cache computes one token, not the whole prefill
            st = self.scheduler.submit(1 if cached else len(ids), max_tokens, gen.target, gen.reason, hashes,
                                       slowdown=slowdown)
        except AdmissionError as e:
            raise ApiError(400, str(e)) from None
        return gen, st

    # -- generation endpoints ----------------------------------------------------------------
    def _parse_kw(self, fault: Fault | None) -> dict:
        return {"served": self.model_name, "max_model_len": self.max_model_len, "encode": self.encode,
                "thinking_tokens": self.config.thinking_tokens,
                "rewrite_tool_history": fault is not None and fault.mode == "rewrite_tool_history"}

    async def openai(self, req: Request, conn: Connection, chat: bool) -> None:
        details = self.config.prefix_caching or self.config.prompt_tokens_details
        await self._generate(req, conn, lambda body, kw: openai_api.parse(body, chat=chat, **kw),
                             lambda r, answer, st: openai_api.OpenAIProtocol(r, self.model_name, answer=answer,
                                                                             cached_details=details))

    async def responses(self, req: Request, conn: Connection) -> None:
        await self._generate(req, conn, responses_api.parse,
                             lambda r, answer, st: responses_api.ResponsesProtocol(r, answer, self.model_name))

    async def messages(self, req: Request, conn: Connection) -> None:
        await self._generate(req, conn, messages_api.parse,
                             lambda r, answer, st: messages_api.MessagesProtocol(r, answer, self.model_name, st))

    async def _generate(self, req: Request, conn: Connection, parse, make_protocol) -> None:
        """A chat-style generation: ``parse(body, kwargs)`` -> an ``OpenAIRequest``;
        ``make_protocol(request, answer, state)`` -> its ``StreamProtocol``."""
        fault = self._fault(req)
        body = self._json(req)
        if await self._pre_fault(fault, conn):
            return
        r = parse(body, self._parse_kw(fault))
        await self.residency.acquire()  # a model unloaded after idling loads first (inside TTFT)
        try:
            gen, st = self._submit(r.prompt_ids, r.max_tokens, seed=r.seed, ignore_eos=r.ignore_eos,
                                   min_tokens=r.min_tokens, fault=fault, stream_interval=r.stream_interval,
                                   reasoning=r.reasoning_tokens, constrained=r.schema is not None)
            # the tool-call and structured modes cut their JSON to the planned tokens
            answer = Answer(gen.target, reasoning=r.reasoning_tokens, schema=r.schema,
                            tool=r.tool_names[0] if r.chat and r.tool_names else None,
                            violate=fault is not None and fault.mode == "schema_violation")
            await self._respond(conn, st, gen, make_protocol(r, answer, st), fault, r.stream)
        finally:
            self.residency.release(None)
            self.residency.served_one()

    async def count_tokens(self, req: Request, conn: Connection, api: str) -> None:
        """``/v1/responses/input_tokens`` and ``/v1/messages/count_tokens``: the prompt ids the
        generation would use; 404 with ``tokenize_endpoint=0``, as a server without a counter."""
        if not self.config.tokenize_endpoint:
            await conn.send(404, JSON, b'{"detail":"Not Found"}')
            return
        body = self._json(req)
        openai_api.check_model(body, self.model_name)
        if api == "responses":
            n = len(openai_api.prompt_ids_of(responses_api.to_chat(body), chat=True, encode=self.encode))
            out: dict = {"object": "response.input_tokens", "input_tokens": n}
        else:
            n = len(openai_api.prompt_ids_of(messages_api.to_chat(body), chat=True, encode=self.encode))
            out = {"input_tokens": n}
        await conn.send(200, JSON, json.dumps(out).encode())

    async def ollama(self, req: Request, conn: Connection, chat: bool) -> None:
        fault = self._fault(req)
        body = self._json(req)
        if await self._pre_fault(fault, conn):
            return
        r = ollama_api.parse(body, chat=chat, served=self.model_name, max_model_len=self.max_model_len,
                             encode=self.encode)
        load_s = await self.residency.acquire()  # Ollama's load after an idle unload: inside TTFT
        try:
            if not r.ids:  # no prompt: a load (or, with keep_alive 0, an unload) request
                await conn.send(200, JSON, ollama_api.load_response(r.name, chat=chat, unloaded=r.keep_alive_s == 0))
                return
            cached = self._cached(r.ids)
            gen, st = self._submit(r.ids, r.max_tokens, seed=r.seed, fault=fault, cached=cached)
            proto = ollama_api.OllamaProtocol(r.name, len(r.ids), chat=chat, cached=cached, load_s=load_s,
                                              thinking_tokens=self.config.thinking_tokens if r.think else 0)
            await self._respond(conn, st, gen, proto, fault, r.stream)
        finally:
            self.residency.release(r.keep_alive_s)
            if r.ids:
                self.residency.served_one()

    def _cached(self, ids: list[int]) -> bool:
        """Ollama's prompt cache (``prompt_cache=N``): was this exact prompt one of the last N?"""
        n = self.config.prompt_cache
        if not n:
            return False
        key = zlib.crc32(b",".join(str(i).encode() for i in ids)) ^ (len(ids) << 32)
        hit = key in self._prompt_cache
        self._prompt_cache[key] = None
        self._prompt_cache.move_to_end(key)
        while len(self._prompt_cache) > n:
            self._prompt_cache.popitem(last=False)
        return hit

    async def _respond(self, conn: Connection, st, gen, proto, fault: Fault | None, streamed: bool) -> None:
        watcher = watch_disconnect(conn, self.scheduler, st)
        try:
            if streamed:
                await stream(conn, self.scheduler, st, gen, proto, fault,
                             no_proxy_buffering=self.config.x_accel_buffering)
            else:
                await respond_full(conn, self.scheduler, st, gen, proto, fault)
        finally:
            watcher.cancel()
            self.scheduler.abort(st)      # a no-op unless the response ended early

    # -- other endpoints ---------------------------------------------------------------------
    async def tokenize(self, req: Request, conn: Connection) -> None:
        if not self.config.tokenize_endpoint:  # tokenize_endpoint=0: a server without one
            await conn.send(404, JSON, b'{"detail":"Not Found"}')
            return
        body = self._json(req)
        if "content" in body and "prompt" not in body and "messages" not in body:   # llama.cpp
            if not isinstance(body["content"], str):
                raise ApiError(400, "content must be a string")
            await conn.send(200, JSON, json.dumps({"tokens": self.encode(body["content"])}).encode())
            return
        openai_api.check_model(body, self.model_name)
        if "messages" in body:
            ids = openai_api.prompt_ids_of(body, chat=True, encode=self.encode)
        elif isinstance(body.get("prompt"), str):
            ids = self.encode(body["prompt"])
        else:
            raise ApiError(400, "tokenize needs prompt (string), messages, or content")
        out = {"count": len(ids), "max_model_len": self.max_model_len, "tokens": ids, "token_strs": None}
        await conn.send(200, JSON, json.dumps(out).encode())

    async def models(self, req: Request, conn: Connection) -> None:
        card = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "reference",
                "root": self.model_name, "parent": None, "max_model_len": self.max_model_len,
                "permission": []}
        await conn.send(200, JSON, json.dumps({"object": "list", "data": [card]}).encode())

    async def health(self, req: Request, conn: Connection) -> None:
        await conn.send(200, JSON, b'{"status":"ok"}')

    async def prom(self, req: Request, conn: Connection, pool: str | None = None) -> None:
        """``/metrics``; a P/D pair's pools at ``/prefill/metrics`` and ``/decode/metrics`` (``/metrics`` 404)."""
        metrics = self.metrics if pool is None else self.pair.metrics[pool] if self.pair is not None else None
        if metrics is None:
            await conn.send(404, JSON, b'{"detail":"Not Found"}')
            return
        await conn.send(200, [("content-type", CONTENT_TYPE)], metrics.render())

    async def ollama_tags(self, req: Request, conn: Connection) -> None:
        await conn.send(200, JSON, ollama_api.tags(self.model_name, self.model_spec))

    async def ollama_ps(self, req: Request, conn: Connection) -> None:
        loaded = self.residency.running()
        await conn.send(200, JSON, ollama_api.ps(self.model_name, self.model_spec,
                                                 False if loaded is None else loaded["expires_in_s"]))

    async def ollama_version(self, req: Request, conn: Connection) -> None:
        await conn.send(200, JSON, json.dumps({"version": VERSION}).encode())


ROUTES: dict[str, tuple] = {  # path -> (method, handler, args)
    "/v1/completions": ("POST", "openai", False),
    "/v1/chat/completions": ("POST", "openai", True),
    "/v1/responses": ("POST", "responses"),
    "/v1/responses/input_tokens": ("POST", "count_tokens", "responses"),
    "/v1/messages": ("POST", "messages"),
    "/v1/messages/count_tokens": ("POST", "count_tokens", "messages"),
    "/api/generate": ("POST", "ollama", False),
    "/api/chat": ("POST", "ollama", True),
    "/api/tags": ("GET", "ollama_tags"),
    "/api/version": ("GET", "ollama_version"),
    "/api/ps": ("GET", "ollama_ps"),
    "/tokenize": ("POST", "tokenize"),
    "/v1/tokenize": ("POST", "tokenize"),
    "/v1/models": ("GET", "models"),
    "/health": ("GET", "health"),
    "/metrics": ("GET", "prom"),
    "/prefill/metrics": ("GET", "prom", "prefill"),
    "/decode/metrics": ("GET", "prom", "decode"),
}
