"""Trace replay: the rows of a Mooncake-format trace (``trace: PATH``, ``core.spec.trace``), each sent
once at its own timestamp (an open loop), a session's later turns each ``delay`` ms after the previous
turn finished, sent as its history (the previous turn's prompt and the text the server answered) and its
own new tokens; the prompts ``client.prepare.trace_prompts`` built before the first send, made of block
texts keyed by the run's nonce and the row's hash ids.  After the run, each record carries its trace row
and the cached tokens the trace declares for it (``core.spec.trace_tokens.DeclaredCache``), and the prefix
cache's expected hits count the rows still in flight too.  See docs/trace-replay.md.
"""
from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ...core.errors import ConfigError, MeasurementError
from ...core.prompts.synthesis import Prompt
from ...core.measure.record import Clock, RequestRecord, TraceTag
from ...core.result.result import Failure, WorkloadResult, is_deterministic_rejection
from ...core.spec.trace import TraceRow, TraceSpec, arrival_offsets_ms, describe, sessions, turn_delay_ms
from ...core.spec.trace_tokens import DeclaredCache, check_context
from ...core.spec.workload import Workload
from ..load.engine import MAX_OPEN_LOOP_THREADS, LagMonitor, LoadRun
from ..placement import placement_for
from ..placement.processes.shard import Shard
from .base import Run, Sent
from .pipeline import measure_samples
from ..transport.clock import MEASUREMENT_CLOCK


#: the warm-up requests' lengths: they only open the connections, and share nothing with the rows
WARMUP_PROMPT_TOKENS = 16
WARMUP_OUTPUT_TOKENS = 2


class TraceReplay:
    name = "trace_replay"

    def __init__(self, worker_replay: "Callable[..., Replay] | None" = None):
        self.worker_replay = worker_replay  # workers: N (``drivers.workers.WorkerReplay``, given by the registry)

    def applies(self, workload: Workload) -> bool:
        return getattr(workload, "trace", None) is not None

    def measure(self, client, workload: Workload, run: Run) -> WorkloadResult:
        """``run.trace_rows``: the rows the plugin loaded (``plugin.trace_load``); a row beyond the
        server's listed context is a ``ConfigError`` (``trace_overlong: error``) before any request."""
        from ..prepare.tokens import context_length

        spec = workload.trace
        assert spec is not None
        if run.trace_rows is None:
            raise ConfigError(f"{spec.path}: the trace was not loaded (run.trace_rows is None): load it with "
                              f"plugin.trace_load.load_trace and pass the rows in Run(trace_rows=...)")
        rows, notes = check_context(list(run.trace_rows), context_length(client), spec.overlong, spec.path,
                                    block_tokens=spec.block_tokens)
        if not rows:
            raise ConfigError(f"{spec.path}: no row is left to replay after trace_overlong: {spec.overlong}")
        inputs = sorted(r.input_length for r in rows)
        outputs = sorted(r.output_length for r in rows)
        w = replace(workload, samples=len(rows), prompt_tokens=inputs[len(inputs) // 2],
                    output_tokens=outputs[len(outputs) // 2])
        # workers: N | auto (sized here, before the replay's warm-up: by its rows in flight), ray: whole sessions each
        shares = placement_for(w).shares(getattr(client, "base_url", None), [])
        if shares.dealt:
            assert self.worker_replay is not None, "the registry gives the trace replay its worker replay"
            replay: Replay = self.worker_replay(rows, spec, notes, client=client)
        else:
            replay = Replay(rows, spec, notes)
        if shares.sizing is not None:
            replay.worker_sizing = shares.sizing  # load.workers_reason
        res = measure_samples(client, w, run, replay)
        replay.record(res)
        return res


@dataclass
class Replay:
    """One measurement's replay: its rows, how to prepare their prompts, how to send them."""
    rows: list[TraceRow]
    spec: TraceSpec
    notes: list[str] = field(default_factory=list)
    engine: bool = True
    clock: Clock = MEASUREMENT_CLOCK
    sleep: Callable[[float], None] = time.sleep
    lag_sleep: Callable[[float], None] = time.sleep  # the lag monitor's (a test's virtual clock: a real one)
    declared: dict[int, int] = field(default_factory=dict)   # row index -> cached tokens declared at its send
    bound: dict[int, int] = field(default_factory=dict)      # row index -> at most, with the rows in flight
    counter: Callable[[str], int] | None = None              # the server's count (a later turn's history)
    skipped: list[int] = field(default_factory=list)         # rows rejected as too long, left out (overlong)
    rejected_row: str = ""
    stopped: Failure | None = None                           # the rejection that stopped the replay
    unsent: int = 0                                          # rows never sent after it
    t0_ns: int | None = None                                 # the start (a worker's: the common one); None: now
    worker_sizing: Any = None                                # workers: N | auto, sized before it (its count and why)

    name: str = "trace_replay"

    @property
    def file(self) -> str:
        return Path(self.spec.path).name

    def applies(self, workload: Workload) -> bool:
        return True

    def measure(self, client, workload: Workload, run: Run) -> WorkloadResult:
        return measure_samples(client, workload, run, self)

    # ------------------------------------------------------------------ prepare
    def prepare(self, client, workload: Workload, *, seed: int, nonce: str, counter=None) -> tuple[list[Prompt], str]:
        """Warm-up prompts (salted, short, sharing nothing with the rows), then one prompt per row
        in row order; a session's later turns hold their new tokens only."""
        from ...core.prompts.block_text import BlockSpec
        from ...core.prompts.synthesis import build_prompts
        from ..prepare.tokens import make_counter
        from ..prepare.trace_prompts import prepare_block_prompts

        how = None
        if counter is None:
            counter, how = make_counter(client, workload, seed, nonce)
        self.counter = None if getattr(counter, "per_char", None) is not None else counter  # an estimate: no
        n = workload.warmup
        warm = build_prompts(counter, n=n, prompt_tokens=WARMUP_PROMPT_TOKENS, seed=seed, nonce=f"{nonce}|warmup",
                             lengths=[WARMUP_PROMPT_TOKENS] * n, output_lengths=[WARMUP_OUTPUT_TOKENS] * n) if n else []
        specs = [BlockSpec(r.hash_ids, r.input_length, r.output_length, opens_prompt=r.first_turn, key=r.index)
                 for r in self.rows]
        prompts, stats = prepare_block_prompts(client, specs, nonce=nonce, seed=seed,
                                               block_tokens=self.spec.block_tokens, counter=counter)
        if workload.mix is not None:  # rows tagged by class: each request is judged with its class
            classes: dict[int | str | None, str | None] = {r.index: r.klass for r in self.rows}
            prompts = [replace(p, mix_class=classes.get(p.key)) for p in prompts]
        cold = build_prompts(counter, n=1, prompt_tokens=WARMUP_PROMPT_TOKENS, seed=seed, nonce=f"{nonce}|cold",
                             output_lengths=[WARMUP_OUTPUT_TOKENS]) if workload.cold_budget else []
        said = stats.description.removeprefix("counter given; ")
        # the pipeline takes the cold-start prompt off the end
        return warm + prompts + cold, f"{how}; {said}" if how else said

    # ------------------------------------------------------------------ send
    def send(self, one, samples: list[Prompt], workload: Workload, run: Run, recover) -> Sent:
        """Every session from its offset, its turns in order, each after the previous answer and the
        row's delay (``ReplaySend``: one send's state and its steps)."""
        return ReplaySend(self, one, {p.key: p for p in samples}, run.progress).run()

    def run_notes(self) -> list[str]:
        notes = list(self.notes)
        if self.skipped:
            notes.append(f"trace_overlong: {self.spec.overlong}: {len(self.skipped)} row(s) left out: the server "
                         f"rejected {self.rejected_row} as beyond its context (it lists no max_model_len to check "
                         f"against before sending); a session's later turns go with its rejected turn")
        return notes

    def keep(self, out: "RequestRecord | Failure", row: TraceRow, stop: threading.Event) -> bool:
        """Is ``out`` a sample?  A row the server rejects as beyond its context is left out under
        ``trace_overlong: skip | clip`` (a server that lists no context: it cannot be clipped before
        sending); any other rejection that every row would get stops the replay, and the rows not
        sent then make the run an error (``stopped``), never a pass on part of the trace."""
        if not isinstance(out, Failure) or not is_deterministic_rejection(out.kind):
            return True
        if out.kind == "context_length" and self.spec.overlong != "error":
            self.skipped.append(row.index)
            self.rejected_row = self.rejected_row or f"{self.file}:{row.line}"
            return False
        if not stop.is_set():
            self.stopped = out
            stop.set()
        return True

    # ------------------------------------------------------------------ after the run
    def record(self, res: WorkloadResult) -> None:
        """The trace's part of the result: what was replayed, and the cached tokens the trace
        declares for each row (the prefix cache's expected hits)."""
        n_sessions = sum(1 for g in sessions(self.rows) if len(g) > 1)
        res.load.set(load_mode="trace", trace=self.file, trace_rows=len(self.rows), trace_sessions=n_sessions,
                     trace_speed=self.spec.speed)
        res.measurement.set(trace=describe(self.spec, self.rows))
        bound = 0
        for rec in res.records:
            if rec.trace is not None and rec.trace.row in self.declared:
                rec.trace.declared_cached_tokens = self.declared[rec.trace.row]
                bound += self.bound[rec.trace.row]
        res.facts.cache_bound_tokens = bound
        if res.facts.prefix_cache is not None:
            res.prefix_cache.expected_cached_tokens = bound
        if self.stopped is not None:
            res.facts.trace_incomplete = (f"trace not replayed: {self.unsent} of {len(self.rows)} rows were not sent: "
                                          f"{self.stopped.message} -- a rejection every row would get "
                                          f"({self.stopped.kind}); "
                                          + ("set trace_overlong: skip or clip, or shorten the trace's rows"
                                             if self.stopped.kind == "context_length" else "fix it and run again"))


@dataclass
class ReplaySend:
    """One replay's sending: the state the session threads share under ``lock`` (the rows completed
    and sent so far, the run, the stop flag), and the steps each session takes."""
    replay: Replay
    one: Callable
    by_row: dict
    progress: Callable[[int, int], None] | None
    load_run: LoadRun = field(default_factory=lambda: LoadRun("trace"))
    lock: Any = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    ends: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        block = self.replay.spec.block_tokens
        self.cache = DeclaredCache(block)  # the rows completed so far: their blocks are cached
        self.sent = DeclaredCache(block)   # the rows sent so far: their blocks may be (vLLM caches a block
        #                                    once its prefill computed it, before the row ends)

    def run(self) -> Sent:
        r, clock = self.replay, self.replay.clock
        groups = sessions(r.rows)
        offsets = arrival_offsets_ms(r.rows, r.spec.speed, r.spec.start_ms)
        with LagMonitor(clock=clock, sleep=r.lag_sleep) as mon, \
                ThreadPoolExecutor(max_workers=min(max(len(groups), 1), MAX_OPEN_LOOP_THREADS),
                                   thread_name_prefix="llm-latency-trace") as pool:
            t0 = clock() if r.t0_ns is None else r.t0_ns
            for f in self.schedule(pool, groups, offsets, t0):
                f.result()
        self.load_run.lag_ns, self.load_run.lag_timeline = list(mon.samples), mon.timeline()
        self.load_run.window_ns = max((max(self.ends) if self.ends else clock()) - t0, 0)
        return Sent(outcomes=list(self.load_run.outcomes), notes=r.run_notes(), load_run=self.load_run)

    def schedule(self, pool: ThreadPoolExecutor, groups: list, offsets: list, t0: int) -> list[Future[None]]:
        """Each session's first turn at its offset from ``t0``; after a stop, the rest are counted unsent."""
        futures: list[Future[None]] = []
        try:
            for turns, off in zip(groups, offsets):
                t_due = t0 + int(off * 1e6)
                self.wait_until(t_due)
                if self.stop.is_set():
                    with self.lock:
                        self.replay.unsent += sum(len(g) for g in groups[len(futures):])
                    break
                futures.append(pool.submit(self.session, turns, t_due))
        except BaseException:  # Ctrl-C while scheduling: the sessions stop at their next wait
            self.stop.set()
            raise
        return futures

    def wait_until(self, t_due: int) -> None:
        while (d := t_due - self.replay.clock()) > 0 and not self.stop.is_set():
            self.replay.sleep(min(d / 1e9, 0.05))

    def session(self, turns: list[TraceRow], t_due: int) -> None:
        prev: tuple[Prompt, RequestRecord] | None = None
        try:
            for k, row in enumerate(turns):
                prompt, history, t_due = self.next_prompt(row, prev, t_due)
                if not self.admit(row, t_due, unsent=len(turns) - k):
                    return
                out = tagged(self.one(prompt, t_due), row, self.replay.file, history)
                kept = self.keep(out, row)
                if not isinstance(out, RequestRecord):
                    self.abandon(turns[k + 1:], out, kept, f"turn {k + 1} of session {row.session_id!r}")
                    return
                prev = (prompt, out)
        except BaseException:
            self.stop.set()  # the other sessions stop too: the error is raised by the main thread
            raise

    def next_prompt(self, row: TraceRow, prev: "tuple[Prompt, RequestRecord] | None",
                    t_due: int) -> tuple[Prompt, int, int]:
        """The row's prompt, its history's tokens and when it is due: a first turn as prepared at its
        offset; a later one continues the previous answer (counted before its delay runs: off the
        timing path), due the row's delay after that answer ended."""
        if prev is None:
            return self.by_row[row.index], 0, t_due
        r = self.replay
        prompt, history = continued(prev[0], prev[1], self.by_row[row.index], row, r.counter)
        assert row.delay_ms is not None
        t_due = (prev[1].t_end_ns or r.clock()) + int(turn_delay_ms(row, r.spec.speed) * 1e6)
        self.wait_until(t_due)
        return prompt, history, t_due

    def admit(self, row: TraceRow, t_due: int, *, unsent: int) -> bool:
        """Send the row?  Not after a stop (it and the session's later turns count unsent); else its
        send lag and the cached tokens the trace declares at its send are kept."""
        r = self.replay
        with self.lock:
            if self.stop.is_set():
                r.unsent += unsent
                return False
            self.load_run.send_lag_ns.append(max(r.clock() - t_due, 0))
            r.declared[row.index] = self.cache.hits(row)  # what the rows completed so far explain
            r.bound[row.index] = self.sent.hits(row)      # what the rows sent so far may explain
            self.sent.completed(row)
            return True

    def keep(self, out: "RequestRecord | Failure", row: TraceRow) -> bool:
        """The outcome kept (``Replay.keep``: a sample, or left out as too long), its end, progress."""
        with self.lock:
            kept = self.replay.keep(out, row, self.stop)
            if kept:
                self.load_run.outcomes.append(out)
            self.ends.append(self.replay.clock())
            if isinstance(out, RequestRecord):
                self.cache.completed(row)
            done = len(self.load_run.outcomes) + len(self.replay.skipped)
        if self.progress:
            self.progress(done, len(self.replay.rows))
        return kept

    def abandon(self, rest: list[TraceRow], out: Failure, kept: bool, which: str) -> None:
        """A failed turn ends its session: the later turns have no history to continue, each an outcome
        of the same kind (a server fault stays one), never dropped; left out with a skipped turn."""
        lost = [tagged(Failure(out.kind, f"not sent: {which} failed ({out.kind})"), r, self.replay.file)
                for r in rest]
        with self.lock:
            if kept:
                self.load_run.outcomes += lost
            else:
                self.replay.skipped += [r.index for r in rest]


def continued(prev_prompt: Prompt, prev: RequestRecord, new: Prompt, row: TraceRow,
              counter: Callable[[str], int] | None = None) -> tuple[Prompt, int]:
    """A session's later turn: the previous prompt, the text the server answered, then the new tokens;
    and the tokens of that history (the server's count of the previous prompt + what it generated).
    Its planned length is the server's count of the whole text where it has a tokenize endpoint
    (``counter``: where the answer's first token meets the previous prompt, a BPE tokenizer may
    merge them), else the history + the row's ``input_length``."""
    answer = "".join(prev.content_parts) if prev.content_parts is not None else \
        "".join(c.text or "" for c in prev.chunks if not c.reasoning)
    history = (prev.prompt_tokens if prev.prompt_tokens is not None else prev_prompt.expected_tokens) + \
        (prev.completion_tokens if prev.completion_tokens is not None else prev.output_tokens)
    user = prev_prompt.user + answer + new.user
    planned = history + row.input_length
    if counter is not None:
        # else the additive plan stands; the server's count of the request checks it
        with contextlib.suppress(MeasurementError, ValueError, OSError):
            planned = int(counter(prev_prompt.system + user))
    return replace(new, system=prev_prompt.system, user=user, expected_tokens=planned, counted_tokens=-1), history


def tagged(out: "RequestRecord | Failure", row: TraceRow, name: str, history: int = 0) -> "RequestRecord | Failure":
    """The outcome with its trace row; a rejected row's message names its file line."""
    tag = TraceTag(row.index, row.line, row.session_id, history)
    if isinstance(out, RequestRecord):
        out.trace = tag
        return out
    return replace(out, message=f"trace {name}:{row.line} (row {row.index}): {out.message}", trace=tag)


@dataclass(frozen=True)
class TraceShard(Shard):
    """A worker's whole trace sessions (``client.placement.processes.shard.Shard``): its ``rows`` (the sessions'
    turns, in order) and the replay's ``spec``; a later turn's outcome is kept at its row index."""
    spec: TraceSpec = field(kw_only=True)
    rows: tuple = field(default=(), kw_only=True)

    def position_of(self, p: Prompt, positions: dict[int, int]) -> int:
        return int(p.key) if p.key is not None else positions[id(p)]  # a later turn: a new prompt, its row

    def run(self, prepared, out, go):
        """The worker's side (``out``: its ``ShardRun``): its sessions replayed from the common start
        (each first turn due at its offset from ``go.t0_ns``); its tagged outcomes by row index, and its
        books (the declared hits are decided by the controller, from the merged stamps:
        ``drivers.workers.WorkerReplay``)."""
        from ..load.send_one import no_gc_pauses

        replay = Replay(list(self.rows), self.spec, clock=go.clock, sleep=go.sleep, t0_ns=go.t0_ns)
        with no_gc_pauses():
            sent = replay.send(go.send, list(self.prompts), None,  # type: ignore[arg-type]
                               Run(progress=go.report), None)
        run = sent.load_run
        out.outcomes = [(o.trace.row, o) for o in run.outcomes]
        out.lag_ns, out.send_lag_ns, out.stalls = run.lag_ns, run.send_lag_ns, run.lag_timeline
        out.window_ns = run.window_ns
        out.books = {"skipped": list(replay.skipped), "rejected_row": replay.rejected_row, "stopped": replay.stopped,
                     "unsent": replay.unsent}
        return out
