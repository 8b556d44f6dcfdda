"""One thread reads every streamed answer of this process whose socket the kernel stamps: why, and
what it saves, in docs/load.md#the-clients-own-health.

A stream's thread sends the request and reads the headers (httpx/httpcore: retries, status, content
type), then hands the body to this process's ``ReadPump`` and sleeps until the answer is complete.
The pump waits on every such socket at once (``epoll``), reads each as it becomes readable with the
kernel's arrival stamp (``recv_stamp.StampedStream``), feeds httpcore's own ``h11.Connection`` (an
answer read to its end leaves the connection reusable, one cut short leaves it to be closed, as
``iter_raw`` would) and pushes each body chunk to the stream's callback.  A read keeps its kernel
stamp however late the pump reaches it; a read stamped when it returns (TLS, another platform,
``use_kernel_stamps(False)``) would take the pump's delay into its stamp, so those sockets keep
reading on their own threads.  The idle timeout between two reads is checked by the pump (to within
``POLL_S``); a stream's thread waits at most its request's total time and one idle timeout more.
"""
from __future__ import annotations

import os
import select
import threading
import time
from typing import Any, Callable

import h11
import httpcore
import httpx

from .recv_stamp import StampedStream

#: the longest the pump sleeps without looking at the idle deadlines
POLL_S = 0.05
READ_NUM_BYTES = 64 * 1024  # as httpcore's HTTP11Connection.READ_NUM_BYTES
_CHAIN = ("_stream", "_httpcore_stream", "_connection")  # httpx → httpcore pool → HTTP/1.1 connection


def h11_connection(resp: httpx.Response, stream: StampedStream) -> Any | None:
    """httpcore's HTTP/1.1 connection under ``resp`` (the one reading ``stream``), or None where the
    chain is not the one this httpx/httpcore pair builds (HTTP/2, another version, a mock)."""
    obj: Any = resp.stream
    for _ in range(6):
        if isinstance(getattr(obj, "_h11_state", None), h11.Connection):
            return obj if getattr(obj, "_network_stream", None) is stream else None
        obj = next((getattr(obj, a) for a in _CHAIN if hasattr(obj, a)), None)
        if obj is None:
            return None
    return None


class _Job:
    """One answer's body: the h11 state it advances and the callback its chunks go to."""

    __slots__ = ("h11", "stream", "on_chunk", "idle_ns", "last_ns", "request", "error", "done")

    def __init__(self, conn: Any, stream: StampedStream, on_chunk: Callable[[bytes], None], idle_s: float,
                 request: httpx.Request):
        self.h11: h11.Connection = conn._h11_state
        self.stream, self.on_chunk, self.request = stream, on_chunk, request
        self.idle_ns = int(idle_s * 1e9)
        self.last_ns = time.monotonic_ns()
        self.error: BaseException | None = None
        self.done = threading.Event()

    def step(self) -> bool:
        """Hand over every chunk h11 holds; True at the body's end."""
        h, on_chunk = self.h11, self.on_chunk
        while True:
            try:
                event = h.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc), request=self.request) from None
            if event is h11.NEED_DATA:
                return False
            if type(event) is h11.Data:
                on_chunk(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage) or event is h11.PAUSED:
                return True

    def readable(self) -> bool:
        """One read of a socket the pump saw readable; True at the body's end."""
        try:
            data = self.stream.read(READ_NUM_BYTES, 0.0)
        except httpcore.ReadError as exc:
            if isinstance(exc.__cause__, BlockingIOError):  # nothing after all
                return False
            raise httpx.ReadError(str(exc), request=self.request) from None
        self.last_ns = time.monotonic_ns()
        self.h11.receive_data(data)  # b"": the peer closed (a close-delimited body ends; else h11 says)
        return self.step()


class ReadPump:
    """This process's reading thread (``pump()``); started on first use, a daemon."""

    def __init__(self) -> None:
        self._ep = select.epoll()
        self._jobs: dict[int, _Job] = {}
        self.bodies = 0  # answers handed to the pump
        self._count_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="llm-latency-reads", daemon=True)
        self._thread.start()

    def pump(self, resp: httpx.Response, conn: Any, stream: StampedStream, on_chunk: Callable[[bytes], None],
             *, idle_s: float, wait_s: float) -> None:
        """Read ``resp``'s body to its end, ``on_chunk`` called (in the pump's thread) with each chunk
        after ``stream``'s latest read stamps it; raises what reading or ``on_chunk`` raised."""
        job = _Job(conn, stream, on_chunk, idle_s, resp.request)
        with self._count_lock:
            self.bodies += 1
        if job.step():  # the whole body came with the headers
            return
        fd = stream.fileno()
        if fd < 0:  # closed under this request (it cannot have reached its end)
            raise httpx.ReadError("the connection was closed before its answer was read", request=resp.request)
        self._jobs[fd] = job
        try:
            self._ep.register(fd, select.EPOLLIN)
        except (OSError, ValueError) as exc:
            self._jobs.pop(fd, None)
            raise httpx.ReadError(f"the answer's socket could not be watched: {exc}", request=resp.request) from None
        if not job.done.wait(wait_s) and self._claim(fd, job):
            raise httpx.ReadTimeout(f"the answer was not complete within {wait_s:g}s", request=resp.request)
        if job.error is not None:
            raise job.error

    def _claim(self, fd: int, job: _Job) -> bool:
        """Take ``job`` off the pump (whoever claims it finishes it): False where it was finished."""
        if self._jobs.get(fd) is not job:
            return False
        del self._jobs[fd]
        try:
            self._ep.unregister(fd)
        except (OSError, ValueError):  # the socket was closed under it (the kernel dropped the watch)
            pass
        return True

    def _finish(self, fd: int, job: _Job, error: BaseException | None = None) -> None:
        if self._claim(fd, job):
            job.error = error
            job.done.set()

    def _run(self) -> None:
        next_scan = time.monotonic_ns() + int(POLL_S * 1e9)
        while True:
            try:
                next_scan = self._turn(next_scan)
            except Exception:  # never let the thread die: every job would wait out its bound
                time.sleep(POLL_S)

    def _turn(self, next_scan: int) -> int:
        """One wait: read what became readable; every ``POLL_S``, fail what stalled or lost its socket."""
        for fd, _ in self._ep.poll(POLL_S):
            job = self._jobs.get(fd)
            if job is None:
                continue
            try:
                if job.readable():
                    self._finish(fd, job)
            except BaseException as exc:  # the stream's thread raises it
                self._finish(fd, job, exc)
        now = time.monotonic_ns()
        if now < next_scan:
            return next_scan
        for fd, job in list(self._jobs.items()):
            if job.stream.fileno() != fd:  # closed under the pump (the kernel dropped its watch with it)
                self._finish(fd, job, httpx.ReadError("the connection was closed while its answer was read",
                                                      request=job.request))
            elif now - job.last_ns > job.idle_ns:  # stalled
                self._finish(fd, job, httpx.ReadTimeout("no bytes within the idle timeout", request=job.request))
        return now + int(POLL_S * 1e9)


_PUMP: list[ReadPump | None] = [None]
_LOCK = threading.Lock()
_PID = [os.getpid()]


def shared_pump() -> ReadPump:
    """This process's pump (a forked child starts its own)."""
    if _PUMP[0] is None or _PID[0] != os.getpid():
        with _LOCK:
            if _PUMP[0] is None or _PID[0] != os.getpid():
                _PUMP[0], _PID[0] = ReadPump(), os.getpid()
    return _PUMP[0]  # type: ignore[return-value]
