"""What one streamed request records, and the builder that stamps it.

The builder takes a clock (``Callable[[], int]`` returning ns); nothing here
reads a global clock.  Adapters call the builder in receive order and stamp
*before* parsing (``stamp()`` first, then feed the decoded event with that
time), so parsing cost never lands inside a latency.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

Clock = Callable[[], int]


@dataclass(frozen=True)
class TokenChunk:
    """One token-bearing chunk: arrival time (ns), how many tokens it carries, and its text
    (a reference to the decoded string, kept so that counts the stream did not give can be
    recovered after it: ``core.measure.metrics.recover_token_counts``)."""

    t_ns: int
    tokens: int
    reasoning: bool = False
    text: str | None = field(default=None, compare=False, repr=False)
    #: how much earlier than ``t_ns`` it may have arrived (kernel stamps: it shared a read with bytes
    #: written after it, ``RecordBuilder.stamp``); 0: stamped at its own arrival (``core.measure.stamp_bounds``)
    bound_ns: int = 0


@dataclass
class TraceTag:
    """Which trace row a request replayed (``client/drivers/trace_replay.py``): its 0-based row
    index, its line in the file, its session; for a session's later turn the tokens of the history
    it continues; after the run, the cached tokens the trace declares for it (``core.spec.trace``)."""

    row: int
    line: int
    session: str | None = None
    history_tokens: int = 0
    declared_cached_tokens: int | None = None


@dataclass
class RequestRecord:
    t_send_ns: int
    t_first_byte_ns: int | None = None
    chunks: list[TokenChunk] = field(default_factory=list)
    t_end_ns: int | None = None
    prompt_tokens: int | None = None        # from usage / prompt_eval_count
    completion_tokens: int | None = None    # from usage / eval_count
    finish_reason: str | None = None
    server_timings: dict = field(default_factory=dict)  # normalized, see ServerTimings keys
    token_counts_exact: bool = False        # per-chunk counts came from the server
    # how the per-chunk token counts were known: a key of ``core.measure.metrics.COUNT_RULES``
    # (None until the stream finished, or while they still have to be recovered)
    token_count_rule: str | None = None
    expected_prompt_tokens: int | None = None
    expected_output_tokens: int | None = None
    text_chars: int = 0
    retries: int = 0
    # Connection timeline (see core/measure/metrics.py).  t_submit: handed to the HTTP client; then
    # pool wait, maybe a TCP/TLS connect (t_connect → t_connected), then t_send.
    t_submit_ns: int | None = None
    t_connect_ns: int | None = None         # this request opened a new connection
    t_connected_ns: int | None = None
    reconnected: bool = False               # re-sent after a stale keep-alive connection failed
    # agent sessions (core.measure.tool_calls): (arrival ns, delta.tool_calls) in order, and the content
    # text, kept only when the caller asks (``RecordBuilder(keep_output=True)``)
    tool_deltas: list = field(default_factory=list)
    content_parts: list[str] | None = None
    # open loop: when the schedule said to send it (the load engine sets it); latency counts
    # from here, so a client that sends late cannot hide the wait (coordinated omission)
    t_scheduled_ns: int | None = None
    trace: TraceTag | None = None           # trace replay: the row it replayed
    # how its reads were stamped (client/transport/recv_stamp.py): "kernel" (every read of the body had the
    # kernel's arrival stamp), "read" (some read kept its return time), None (an injected clock)
    stamp: str | None = None
    read_delays_ns: list[int] = field(default_factory=list)  # kernel stamps: t_returned − t_arrival per read
    t_written_ns: int | None = None         # the request's last byte handed to the kernel (t_send ≤ it)
    # the worker process that sent it, "pid@host" (client/placement/processes/workers.py)
    worker: str | None = None
    # structured output (core.measure.structured): "constrained" (sent with the schema, its answer validated),
    # "comparison" (the unconstrained twin), None (not a structured workload)
    structured: str | None = None
    mix_class: str | None = None            # a mixed workload's class (core.spec.mix_spec), None: not a mix

    def __post_init__(self):
        if self.t_submit_ns is None:
            self.t_submit_ns = self.t_send_ns

    @property
    def t_first_token_ns(self) -> int | None:
        """First chunk with any token (content, reasoning, tool call or text)."""
        return self.chunks[0].t_ns if self.chunks else None

    @property
    def t_first_output_ns(self) -> int | None:
        """First chunk with non-reasoning output (TTFO)."""
        return next((c.t_ns for c in self.chunks if not c.reasoning), None)

    @property
    def t_last_token_ns(self) -> int | None:
        return self.chunks[-1].t_ns if self.chunks else None

    @property
    def output_tokens(self) -> int:
        """N: the server's completion_tokens when reported, else the counted tokens."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        return sum(c.tokens for c in self.chunks)

    @property
    def short_output(self) -> bool:
        """The server produced fewer tokens than the forced length asked for.  Never for a
        constrained request (structured output): its decoding stops at the grammar's end."""
        if self.structured == "constrained":
            return False
        return self.expected_output_tokens is not None and self.output_tokens < self.expected_output_tokens

    @property
    def prompt_deviation(self) -> int | None:
        """Reported prompt tokens minus the planned exact count (None if either is unknown)."""
        if self.prompt_tokens is None or self.expected_prompt_tokens is None:
            return None
        return self.prompt_tokens - self.expected_prompt_tokens


class RecordBuilder:
    """Accumulates one request's timeline.

    ``running_completion_tokens`` (vLLM/SGLang ``continuous_usage_stats``) gives
    exact per-chunk counts; without it every token-bearing chunk counts 1 and the
    record is marked ``token_counts_exact=False`` (TPOT still takes N from usage), and
    its counts are recovered after the stream (``core.measure.metrics.recover_token_counts``).
    """

    def __init__(self, clock: Clock, *, expected_prompt_tokens: int | None = None,
                 expected_output_tokens: int | None = None, keep_output: bool = False):
        self.clock = clock
        # t_send starts as the hand-over time; a transport that reports when the request is
        # written on an open connection (``sent``) moves it there
        self.record = RequestRecord(t_send_ns=clock(), expected_prompt_tokens=expected_prompt_tokens,
                                    expected_output_tokens=expected_output_tokens)
        self._running: int | None = None
        self._exact = True
        self._read_seq: int | None = None   # the socket read the latest ``stamp`` belonged to
        self._read_start = 0                # its first chunk's index
        self._span = 0                      # its span (ns): since the previous read's arrival
        self._piece_is_write = True         # an HTTP chunk is one write of the server's (``body_framing``)
        if keep_output:
            self.record.content_parts = []

    def connect_started(self, t_ns: int) -> None:
        """The request needs a new connection: its TCP connect starts (a later connect,
        e.g. after a stale keep-alive retry, replaces an earlier one)."""
        self.record.t_connect_ns, self.record.t_connected_ns = t_ns, None

    def connected(self, t_ns: int) -> None:
        """TCP connect (and TLS handshake, if any) done."""
        if self.record.t_connect_ns is not None:
            self.record.t_connected_ns = t_ns

    def sent(self, t_ns: int) -> None:
        """The request starts going out on an open connection: this is ``t_send``."""
        self.record.t_send_ns = t_ns

    def written(self, t_ns: int) -> None:
        """The request's last byte was handed to the kernel (``t_written``)."""
        self.record.t_written_ns = t_ns

    def sent_kernel(self, t_ns: int) -> None:
        """The kernel's transmit stamp of the request's last byte: ``t_send`` exactly (``t_written``
        too), where it falls after the client's own stamp before writing and before any answer."""
        rec = self.record
        if rec.t_send_ns <= t_ns and (rec.t_first_byte_ns is None or t_ns <= rec.t_first_byte_ns):
            rec.t_send_ns = rec.t_written_ns = t_ns

    def stamp(self, t_ns: int | None = None, *, read: tuple[int, int, int | None] | None = None) -> int:
        """Read the clock for bytes that just arrived (or take ``t_ns``: the stamp of the socket
        read that brought them); first call sets first byte.

        ``read`` = (its number on the connection, its span, the client's delay on it or None): a
        kernel stamp is the arrival of a read's *last* byte, so a token followed in the same read
        by bytes the server may have written later (a later HTTP chunk: usage, finish, ``[DONE]``
        or another token) may have arrived up to ``span`` ns before its stamp: its
        ``TokenChunk.bound_ns`` widens to the span (``core.measure.stamp_bounds``).  ``delay`` None: the
        read was stamped when it returned (``stamp``: "read")."""
        t = self.clock() if t_ns is None else t_ns
        rec = self.record
        if rec.t_first_byte_ns is None:
            rec.t_first_byte_ns = t
        if read is not None:
            seq, span, delay = read
            if seq == self._read_seq:  # a later piece of the same read: perhaps a later write
                self._widen()
            else:
                self._read_seq, self._read_start, self._span = seq, len(rec.chunks), span
                if delay is None:
                    rec.stamp = "read"
                else:
                    rec.read_delays_ns.append(delay)
                    if rec.stamp is None:
                        rec.stamp = "kernel"
        return t

    def body_framing(self, chunked: bool) -> None:
        """How the body is framed: HTTP chunks (each one write of the server's: the events inside
        one arrived together) or not (a close-delimited or sized body, handed over a read at a
        time: any event may have been its own write, so a token followed by another event of the
        same read may have arrived before its stamp)."""
        self._piece_is_write = chunked

    def event(self) -> None:
        """Another event parsed from the latest piece (call it before the event's own
        ``token_chunk``): without HTTP chunks, the tokens before it in the same read widen."""
        if not self._piece_is_write:
            self._widen()

    def _widen(self) -> None:
        chunks, span = self.record.chunks, self._span
        for i in range(self._read_start, len(chunks)):
            if chunks[i].bound_ns < span:
                chunks[i] = replace(chunks[i], bound_ns=span)

    def token_chunk(self, t_ns: int, *, text_len: int = 0, reasoning: bool = False,
                    running_completion_tokens: int | None = None, n_tokens: int | None = None,
                    text: str | None = None) -> None:
        """Record a chunk that carries output (content, reasoning, tool_calls or text);
        ``text`` is the chunk's text (content or reasoning), for counting it after the stream."""
        if n_tokens is None and running_completion_tokens is not None:
            prev = self._running or 0
            n_tokens = max(running_completion_tokens - prev, 1)
            self._running = running_completion_tokens
        elif n_tokens is None:
            n_tokens = 1
            self._exact = False
        self.record.chunks.append(TokenChunk(t_ns, n_tokens, reasoning, text))
        self.record.text_chars += text_len

    def usage(self, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        if prompt_tokens is not None:
            self.record.prompt_tokens = int(prompt_tokens)
        if completion_tokens is not None:
            self.record.completion_tokens = int(completion_tokens)

    def finish(self, t_ns: int, finish_reason: str | None = None) -> RequestRecord:
        rec = self.record
        rec.t_end_ns = t_ns
        if finish_reason is not None:
            rec.finish_reason = finish_reason
        # without per-chunk counts, N token-bearing chunks for N tokens (llama.cpp, Ollama) can
        # only be one token each: exact after all, so no "ITL is per chunk" note on every run
        one_each = rec.completion_tokens is not None and rec.completion_tokens == len(rec.chunks)
        rec.token_counts_exact = (self._exact or one_each) and bool(rec.chunks)
        if rec.token_counts_exact:
            rec.token_count_rule = "server" if self._exact else "one each"
        return rec
